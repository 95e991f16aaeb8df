"""Statements on jobs: enqueue, the worker's claim and settlements, reads, and the
operators' repairs. Each function runs the template it is named after.

``conn`` is a ``Conn``: a Connection (the caller's transaction applies) or a Pool.
Settlements are guarded by the claimant's token (``_if_owned``): they apply only while
this run still holds the claim, and say whether they did.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from venturi import sql
from venturi.backoff import Backoff
from venturi.db.conn import Conn, Record
from venturi.db.connect import transaction
from venturi.db.schema import needs_schema


class NewJob(Protocol):
    """What an enqueue writes (``venturi.registry.JobSpec`` has these fields)."""

    @property
    def kind(self) -> str: ...

    @property
    def carry(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def at(self) -> datetime | None: ...

    @property
    def after(self) -> float | None: ...

    @property
    def key(self) -> str | None: ...

    @property
    def max_failures(self) -> int: ...

    @property
    def backoff(self) -> Backoff | None: ...


@dataclass(frozen=True)
class Claimant:
    """Who claims: ``name`` is the identity recorded on claims and in the journal
    (diagnostics only); ``token``, unique to each worker run, is what ownership compares.
    Two claimants with the same name never settle, renew or release each other's jobs."""

    name: str
    token: uuid.UUID = field(default_factory=uuid.uuid4)


# --- enqueue ------------------------------------------------------------------------


def _backoff_args(spec: NewJob) -> tuple[float | None, float | None, float | None, bool | None]:
    b = spec.backoff
    return (None, None, None, None) if b is None else (b.base, b.factor, b.cap, b.jitter)


@needs_schema
async def job_insert(
    conn: Conn, *, schema: str, spec: NewJob, traceparent: str | None = None
) -> int:
    """Insert one job (or find the unfinished holder of its key); its id. ``traceparent``:
    the W3C trace context of the enqueuing span, stored for the worker's span."""
    text = sql.statement("job_insert", schema)
    args = (
        spec.kind,
        spec.carry,
        spec.priority,
        spec.at,
        spec.after,
        spec.key,
        spec.max_failures,
        *_backoff_args(spec),
        traceparent,
    )
    # A None answer means the key's holder committed after our snapshot; try again.
    for _ in range(5):
        job_id = await conn.fetchval(text, *args)
        if job_id is not None:
            return int(job_id)
    raise RuntimeError(f"could not enqueue {spec.kind!r} with key {spec.key!r}: key kept changing")


def _backoff_arrays(specs: Sequence[NewJob]) -> list[list[Any]]:
    """The base, factor, cap and jitter arrays of the specs' declared backoffs."""
    rows = [_backoff_args(s) for s in specs]
    return [[r[i] for r in rows] for i in range(4)]


@needs_schema
async def job_insert_many(
    conn: Any, *, schema: str, specs: Sequence[NewJob], traceparent: str | None = None
) -> list[int]:
    """Insert jobs all or nothing; their ids in input order. Without keys this is one
    ``job_insert_many_unkeyed``; with keys, ``job_insert_many`` in a transaction (a
    savepoint inside the caller's), run again for the rows whose key holder moved."""
    if all(s.key is None for s in specs):
        # One statement: all or nothing by itself, and no key to wait on.
        rows = await conn.fetch(
            sql.statement("job_insert_many_unkeyed", schema),
            [s.kind for s in specs],
            [s.carry for s in specs],
            [s.priority for s in specs],
            [s.at for s in specs],
            [s.after for s in specs],
            [s.max_failures for s in specs],
            *_backoff_arrays(specs),
            traceparent,
        )
        # Ascending ids are input order (see the statement's header).
        return sorted(int(r["id"]) for r in rows)
    # A key whose holder commits while the statement waits on it comes back without an
    # id; the statement runs again for those rows. The batch is one transaction, so a
    # batch that cannot finish leaves nothing behind.
    async with transaction(conn) as tx:
        text = sql.statement("job_insert_many", schema)
        ids: list[int | None] = [None] * len(specs)
        todo = list(range(len(specs)))
        for _ in range(5):
            rows = await tx.fetch(
                text,
                [specs[i].kind for i in todo],
                [specs[i].carry for i in todo],
                [specs[i].priority for i in todo],
                [specs[i].at for i in todo],
                [specs[i].after for i in todo],
                [specs[i].key for i in todo],
                [specs[i].max_failures for i in todo],
                *_backoff_arrays([specs[i] for i in todo]),
                traceparent,
            )
            for i, row in zip(todo, rows, strict=True):
                ids[i] = None if row["id"] is None else int(row["id"])
            todo = [i for i in todo if ids[i] is None]
            if not todo:
                return [int(i) for i in ids if i is not None]
        s = specs[todo[0]]
        raise RuntimeError(f"could not enqueue {s.kind!r} with key {s.key!r}: key kept changing")


# --- the worker's statements --------------------------------------------------------


class ClaimAnswer(NamedTuple):
    """What ``job_claim`` did: the rows it claimed, the ids whose completion applied (the
    others lost their claim), and the expired claims it recovered first (rows with
    id, kind, attempt, failures, max_failures and ``recovered_from``, the dead claimer)."""

    claimed: list[Record]
    settled: set[int]
    recovered: list[Record]


async def job_claim(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    floor: int,
    limit: int,
    backoff: Backoff,
    done: Sequence[tuple[int, int, str | None]] = (),
) -> ClaimAnswer:
    """Settle ``done`` (id, attempt, result) as completed, recover expired claims (a CTE,
    ``_recover_cte``; ``backoff`` for tasks that declared none) and claim up to ``limit``
    jobs of ``kinds`` at priority ``floor`` or above, in one statement and one commit."""
    rows = await conn.fetch(
        sql.statement("job_claim", schema),
        claimant.name,
        kinds,
        leases,
        floor,
        limit,
        backoff.base,
        backoff.factor,
        backoff.cap,
        [d[0] for d in done],
        [d[1] for d in done],
        [d[2] for d in done],
        claimant.token,
        backoff.jitter,
    )
    claimed = [r for r in rows if not r["settled"]]
    settled = {int(r["id"]) for r in rows if r["settled"] and r["recovered_from"] is None}
    recovered = [r for r in rows if r["recovered_from"] is not None]
    return ClaimAnswer(claimed, settled, recovered)


async def job_next_visible_at(conn: Conn, *, schema: str, kinds: Sequence[str]) -> datetime | None:
    """When the next pending job of ``kinds`` becomes visible (due ones included)."""
    value: datetime | None = await conn.fetchval(
        sql.statement("job_next_visible_at", schema), kinds
    )
    return value


async def job_complete_many_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    results: Sequence[str | None],
) -> set[int]:
    """Complete the jobs still owned; the ids that applied."""
    rows = await conn.fetch(
        sql.statement("job_complete_many_if_owned", schema), claimant.token, ids, attempts, results
    )
    return {int(r["id"]) for r in rows}


async def job_pause_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    job_id: int,
    attempt: int,
    carry: str,
    at: datetime | None,
    after: float | None,
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_pause_if_owned", schema),
        claimant.token,
        job_id,
        attempt,
        carry,
        at,
        after,
    )
    return row is not None


async def job_fail_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    job_id: int,
    attempt: int,
    event: str,
    error: str,
    carry: str | None,
    delay: float,
    force_dead: bool,
) -> str | None:
    """Settle a failed execution (``event`` failed, timed-out or retried); returns the new
    status (pending or dead), or None if the claim was lost."""
    row = await conn.fetchrow(
        sql.statement("job_fail_if_owned", schema),
        claimant.token,
        job_id,
        attempt,
        event,
        error,
        carry,
        delay,
        force_dead,
    )
    return None if row is None else str(row["status"])


async def job_dead_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, reason: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_dead_if_owned", schema), claimant.token, job_id, attempt, reason
    )
    return row is not None


async def job_release_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_release_if_owned", schema), claimant.token, job_id, attempt, detail
    )
    return row is not None


async def job_cancel_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_cancel_if_owned", schema), claimant.token, job_id, attempt, detail
    )
    return row is not None


async def job_recover_stale(
    conn: Conn, *, schema: str, recoverer: str, backoff: Backoff
) -> list[Record]:
    """Recover expired claims; ``backoff`` applies to jobs whose task declared none."""
    return list(
        await conn.fetch(
            sql.statement("job_recover_stale", schema),
            recoverer,
            backoff.base,
            backoff.factor,
            backoff.cap,
            backoff.jitter,
        )
    )


async def job_heartbeat_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    leases: Sequence[float | None],
) -> list[Record]:
    """Renew due leases and read ownership and cancel requests of running jobs."""
    return list(
        await conn.fetch(
            sql.statement("job_heartbeat_if_owned", schema), claimant.token, ids, attempts, leases
        )
    )


async def job_release_orphans_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, running: Sequence[int]
) -> list[Record]:
    """Release jobs claimed with ``claimant``'s token that it is not running (a lost claim
    answer); other claimants of the same name keep theirs."""
    return list(
        await conn.fetch(
            sql.statement("job_release_orphans_if_owned", schema), claimant.token, list(running)
        )
    )


# --- reads --------------------------------------------------------------------------


@needs_schema
async def job_get(conn: Conn, *, schema: str, job_id: int) -> Record | None:
    return await conn.fetchrow(sql.statement("job_get", schema), job_id)


async def job_counts(conn: Conn, *, schema: str, ids: Sequence[int] | None = None) -> list[Record]:
    """Jobs per kind and status (of ``ids`` only, when given)."""
    return list(await conn.fetch(sql.statement("job_counts", schema), ids))


async def job_result_get(conn: Conn, *, schema: str, job_id: int) -> Record | None:
    """kind, status, result (JSON text) and finished_seconds_ago of one job, or None."""
    return await conn.fetchrow(sql.statement("job_result_get", schema), job_id)


async def job_due_count(conn: Conn, *, schema: str, kinds: Sequence[str], claimed_by: str) -> int:
    """Jobs of ``kinds`` due now, or claimed by ``claimed_by`` and not yet settled."""
    return int(await conn.fetchval(sql.statement("job_due_count", schema), kinds, claimed_by))


async def job_list_claimed_by(conn: Conn, *, schema: str, claimed_by: str) -> list[Record]:
    """The ids of the jobs whose latest claim is ``claimed_by``'s, in id order."""
    return list(await conn.fetch(sql.statement("job_list_claimed_by", schema), claimed_by))


# --- operators ----------------------------------------------------------------------


async def job_list(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    limit: int,
    key: str | None = None,
    before: int | None = None,
) -> list[Record]:
    return list(
        await conn.fetch(sql.statement("job_list", schema), status, kind, limit, key, before)
    )


async def job_delete_many_if_not_claimed(
    conn: Conn, *, schema: str, ids: Sequence[int]
) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_delete_many_if_not_claimed", schema), ids))


async def job_run_now_many_if_pending(
    conn: Conn, *, schema: str, ids: Sequence[int], operator: str, detail: str
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_run_now_many_if_pending", schema), ids, operator, detail
        )
    )


async def job_count_matching(
    conn: Conn, *, schema: str, status: str | None, kind: str | None, key: str | None
) -> Record:
    return await conn.fetchrow(sql.statement("job_count_matching", schema), status, kind, key)


async def job_ids_matching(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    before: int,
    limit: int,
) -> list[int]:
    text = sql.statement("job_ids_matching", schema)
    return [r["id"] for r in await conn.fetch(text, status, kind, key, before, limit)]


async def job_retry_many_if_dead_or_cancelled(
    conn: Conn, *, schema: str, ids: Sequence[int], operator: str, detail: str
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_retry_many_if_dead_or_cancelled", schema), ids, operator, detail
        )
    )


async def job_cancel_many(
    conn: Conn, *, schema: str, ids: Sequence[int], operator: str, detail: str
) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_cancel_many", schema), ids, operator, detail))


async def job_stats(
    conn: Conn,
    *,
    schema: str,
    manual_detail: str,
    completed_window: float,
    failures_window: float,
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_stats", schema), manual_detail, completed_window, failures_window
        )
    )


async def job_top(
    conn: Conn,
    *,
    schema: str,
    manual_detail: str,
    completed_window: float,
    failures_window: float,
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_top", schema), manual_detail, completed_window, failures_window
        )
    )


async def job_purge_count(
    conn: Conn, *, schema: str, status: str, older_than: float, kind: str | None
) -> int:
    return int(
        await conn.fetchval(sql.statement("job_purge_count", schema), status, older_than, kind)
    )


async def job_purge_batch(
    conn: Conn,
    *,
    schema: str,
    status: str,
    older_than: float,
    kind: str | None,
    batch: int,
) -> int:
    """Delete up to ``batch`` finished jobs of ``status`` (their journal cascades); how
    many."""
    return int(
        await conn.fetchval(
            sql.statement("job_purge_batch", schema), status, older_than, kind, batch
        )
    )


async def job_result_clear_expired(
    conn: Conn, *, schema: str, kind: str, ttl: float, batch: int
) -> int:
    """Clear up to ``batch`` results of ``kind`` older than ``ttl`` seconds; how many."""
    return int(
        await conn.fetchval(
            sql.statement("job_result_clear_expired", schema), kind, float(ttl), batch
        )
    )
