"""Statements of workflows (SPEC 12): recorded steps, signals, children, waits and
timers, and the Workflow graph. Each function runs the template it is named after.

The worker's primitives run on its pool (``Conn``); ``signal`` and ``workflow_insert``
are the application's calls, written once as ``drivers.Steps`` and run on every driver
(async and ``_sync`` twins), in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from venturi import sql
from venturi.db import drivers
from venturi.db.claims import Claimant
from venturi.db.conn import Conn, Record
from venturi.db.drivers import Query, Steps
from venturi.db.enqueue import JobSpec, backoff_args, backoff_arrays, batch_columns, column


@dataclass(frozen=True)
class Recorded:
    """A recorded step: its value (JSON text) and, for a timer, its wake time."""

    value: str
    wake_at: datetime | None


@dataclass(frozen=True)
class Loaded:
    """What a run's first workflow primitive reads: the database's clock, the job's
    wake_seq and its recorded steps by name."""

    now: datetime | None
    wake_seq: int
    steps: dict[str, Recorded]


async def step_list(conn: Conn, *, schema: str, job_id: int) -> Loaded:
    """The job's recorded steps, its wake_seq and the database's clock (one statement)."""
    rows = await conn.fetch(sql.statement("step_list", schema), job_id)
    if not rows:
        return Loaded(None, 0, {})
    steps = {
        str(r["name"]): Recorded(str(r["value"]), r["wake_at"])
        for r in rows
        if r["name"] is not None
    }
    return Loaded(rows[0]["now"], int(rows[0]["wake_seq"]), steps)


async def step_record(
    conn: Conn,
    *,
    schema: str,
    job_id: int,
    name: str,
    value: str,
    wake_at: datetime | None = None,
) -> tuple[Recorded, bool]:
    """Record a step once; the recorded step (another run's, if it recorded the name
    first) and whether this call recorded it."""
    row = await conn.fetchrow(sql.statement("step_record", schema), job_id, name, value, wake_at)
    assert row is not None  # an insert or an update of the conflicting row, always
    return Recorded(str(row["value"]), row["wake_at"]), bool(row["inserted"])


async def signal_get(conn: Conn, *, schema: str, job_id: int, name: str) -> tuple[int, str | None]:
    """The job's wake_seq and the payload (JSON text) of its signal ``name``, if sent."""
    row = await conn.fetchrow(sql.statement("signal_get", schema), job_id, name)
    if row is None:
        return 0, None
    return int(row["wake_seq"]), row["payload"]


async def child_spawn(
    conn: Conn,
    *,
    schema: str,
    parent_id: int,
    name: str,
    spec: JobSpec,
    traceparent: str | None,
) -> Record:
    """Insert a child and record its id as the parent's step ``name``, in one statement:
    id, inserted (this call recorded the step), spawned (the child row was inserted),
    holder (the unfinished job holding the child's key)."""
    row = await conn.fetchrow(
        sql.statement("child_spawn", schema),
        parent_id,
        name,
        spec.kind,
        spec.carry,
        spec.priority,
        spec.max_failures,
        *backoff_args(spec),
        spec.key,
        traceparent,
        spec.group,
    )
    assert row is not None
    return row


async def job_ids_draw(conn: Conn, *, schema: str, count: int) -> list[int]:
    """``count`` fresh ids of the jobs table's identity, ascending: a read, no write to
    commit (the spawns that take them are written later, together)."""
    row = await conn.fetchrow(sql.statement("job_ids_draw", schema), count)
    assert row is not None
    return [int(i) for i in row["ids"]]


async def child_spawn_many(
    conn: Conn,
    *,
    schema: str,
    parent_id: int,
    names: Sequence[str],
    ids: Sequence[int],
    specs: Sequence[JobSpec],
    traceparents: Sequence[str | None],
) -> dict[str, tuple[int, bool]]:
    """Insert unkeyed children with the drawn ``ids`` and record each as the parent's
    step of the same position in ``names``, in one statement; by name, the recorded id
    (another run's if it recorded the name first) and whether this call recorded it."""
    rows = await conn.fetch(
        sql.statement("child_spawn_many", schema),
        parent_id,
        list(names),
        list(ids),
        [s.kind for s in specs],
        [s.carry for s in specs],
        [s.priority for s in specs],
        [s.max_failures for s in specs],
        *backoff_arrays(specs),
        list(traceparents),
        column([s.group for s in specs]),
    )
    return {str(r["name"]): (int(r["id"]), bool(r["inserted"])) for r in rows}


async def child_list(
    conn: Conn, *, schema: str, job_id: int, ids: Sequence[int]
) -> tuple[int, list[Record]]:
    """The parent's wake_seq and each child's id, kind, status, result and last_error,
    in ``ids`` order, from one snapshot."""
    rows = list(await conn.fetch(sql.statement("child_list", schema), job_id, list(ids)))
    seq = int(rows[0]["wake_seq"]) if rows and rows[0]["wake_seq"] is not None else 0
    return seq, rows


async def job_workflow_get(conn: Conn, *, schema: str, job_id: int) -> Record | None:
    """A job's status, parent_id and wait columns, and its steps, signals, children and
    dependencies as JSON text arrays; None when the job does not exist."""
    return await conn.fetchrow(sql.statement("job_workflow_get", schema), job_id)


async def dependency_result(conn: Conn, *, schema: str, job_id: int, name: str) -> Record | None:
    """The dependency named ``name`` of a Workflow node: id, kind, status, result."""
    return await conn.fetchrow(sql.statement("dependency_result", schema), job_id, name)


async def job_wait_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    job_id: int,
    attempt: int,
    seen: int,
    wake_at: datetime | None,
    signal: str | None,
    wait_for: Sequence[int] | None,
    detail: str,
) -> str | None:
    """Settle a run that waits: 'waiting', or 'pending' when an event came since it
    looked (``seen``); None when the claim was lost."""
    row = await conn.fetchrow(
        sql.statement("job_wait_if_owned", schema),
        claimant.token,
        job_id,
        attempt,
        seen,
        wake_at,
        signal,
        None if wait_for is None else list(wait_for),
        detail,
    )
    return None if row is None else str(row["status"])


@dataclass(frozen=True)
class Wait:
    """One run's wait, as ``job_wait_if_owned`` takes it."""

    job_id: int
    attempt: int
    seen: int
    wake_at: datetime | None
    signal: str | None
    wait_for: Sequence[int] | None
    detail: str


async def job_wait_many_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, waits: Sequence[Wait]
) -> dict[int, str]:
    """Settle runs that wait, in one statement: by job id, 'waiting', or 'pending' when
    an event came since its run looked; a job whose claim was lost is absent."""
    rows = await conn.fetch(
        sql.statement("job_wait_many_if_owned", schema),
        claimant.token,
        [w.job_id for w in waits],
        [w.attempt for w in waits],
        [w.seen for w in waits],
        [w.wake_at for w in waits],
        [w.signal for w in waits],
        [
            None if w.wait_for is None else "{" + ",".join(str(int(i)) for i in w.wait_for) + "}"
            for w in waits
        ],
        [w.detail for w in waits],
    )
    return {int(r["id"]): str(r["status"]) for r in rows}


async def job_wake_due(conn: Conn, *, schema: str, kinds: Sequence[str]) -> int:
    """Wake the waiting jobs of ``kinds`` whose timer is due; how many."""
    return int(await conn.fetchval(sql.statement("job_wake_due", schema), list(kinds)))


async def job_wake_timers_now(conn: Conn, *, schema: str, kinds: Sequence[str]) -> int:
    """Fast-forward the timers of the waiting jobs of ``kinds`` (``venturi.testing``);
    how many it woke."""
    return int(await conn.fetchval(sql.statement("job_wake_timers_now", schema), list(kinds)))


# --- the application's calls ----------------------------------------------------------


def signal_steps(*, job_id: int, name: str, payload: str) -> Steps[bool]:
    """Record signal ``name`` for ``job_id`` (the first of a name wins); whether it was."""
    rows = yield Query("signal_send", (job_id, name, payload))
    return bool(rows and rows[0]["sent"])


async def signal_send(conn: Any, *, schema: str, job_id: int, name: str, payload: str) -> bool:
    """``signal_steps`` on an async connection (``drivers.run``)."""
    return await drivers.run(
        conn, signal_steps(job_id=job_id, name=name, payload=payload), schema=schema
    )


def signal_send_sync(conn: Any, *, schema: str, job_id: int, name: str, payload: str) -> bool:
    """``signal_steps`` on a sync connection (``drivers.run_sync``)."""
    return drivers.run_sync(
        conn, signal_steps(job_id=job_id, name=name, payload=payload), schema=schema
    )


@dataclass(frozen=True)
class GraphJob:
    """One job of a Workflow graph as its insert takes it: its spec and the positions
    of the jobs it comes after, with their node names."""

    spec: JobSpec
    after: tuple[tuple[int, str], ...]


def workflow_insert_steps(
    *, nodes: Sequence[GraphJob], traceparent: str | None
) -> Steps[list[int]]:
    """Draw ids for ``nodes`` (``job_ids_draw``) and insert them with their edges
    (``workflow_insert``); the ids in node order. Run ``atomic``."""
    drawn = yield Query("job_ids_draw", (len(nodes),))
    ids = [int(i) for i in drawn[0]["ids"]]
    depended = {pos for n in nodes for pos, _ in n.after}
    specs = [n.spec for n in nodes]
    edges = [(ids[i], name, ids[pos]) for i, n in enumerate(nodes) for pos, name in n.after]
    yield Query(
        "workflow_insert",
        (
            ids,
            *batch_columns(specs),
            [
                "{" + ",".join(str(ids[pos]) for pos, _ in n.after) + "}" if n.after else None
                for n in nodes
            ],
            [True if i in depended else None for i in range(len(nodes))],
            traceparent,
            [e[0] for e in edges],
            [e[1] for e in edges],
            [e[2] for e in edges],
            column([s.group for s in specs]),
        ),
    )
    return ids


async def workflow_insert(
    conn: Any, *, schema: str, nodes: Sequence[GraphJob], traceparent: str | None
) -> list[int]:
    """``workflow_insert_steps`` on an async connection, in one transaction."""
    steps = workflow_insert_steps(nodes=nodes, traceparent=traceparent)
    return await drivers.run(conn, steps, schema=schema, atomic=True)


def workflow_insert_sync(
    conn: Any, *, schema: str, nodes: Sequence[GraphJob], traceparent: str | None
) -> list[int]:
    """``workflow_insert_steps`` on a sync connection, in one transaction."""
    steps = workflow_insert_steps(nodes=nodes, traceparent=traceparent)
    return drivers.run_sync(conn, steps, schema=schema, atomic=True)
