"""Statements on jobs: enqueue, the worker's claim and settlements, reads, and the
operators' repairs. Each function runs the template it is named after.

``conn`` is a ``Conn``: a Connection (the caller's transaction applies) or a Pool.
Settlements are guarded by the claimant's token (``_if_owned``): they apply only while
this run still holds the claim, and say whether they did.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from venturi import sql
from venturi.backoff import Backoff
from venturi.db import drivers
from venturi.db.conn import Conn, Record
from venturi.db.connect import transaction
from venturi.db.drivers import Query, Row, Steps
from venturi.db.held import Held
from venturi.db.schema import needs_schema
from venturi.errors import ConfigError, DuplicateJob


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

    @property
    def unique_for(self) -> float | None: ...


@dataclass(frozen=True)
class Claimant:
    """Who claims: ``name`` is the identity recorded on claims and in the journal
    (diagnostics only); ``token``, unique to each worker run, is what ownership compares.
    Two claimants with the same name never settle, renew or release each other's jobs."""

    name: str
    token: uuid.UUID = field(default_factory=uuid.uuid4)


# --- enqueue ------------------------------------------------------------------------
#
# The application's calls, written once as steps (``drivers.Steps``) that every driver
# runs: ``job_insert`` and ``job_insert_many`` (async, any driver ``drivers.run`` takes)
# and their ``_sync`` twins are the same steps on another seam.

ON_CONFLICT = ("existing", "raise", "replace")


def _backoff_args(spec: NewJob) -> tuple[float | None, float | None, float | None, bool | None]:
    b = spec.backoff
    return (None, None, None, None) if b is None else (b.base, b.factor, b.cap, b.jitter)


def job_insert_args(
    spec: NewJob, on_conflict: str = "existing", traceparent: str | None = None
) -> tuple[Any, ...]:
    """The values of ``job_insert``'s ``$1..$n`` for one job. ``traceparent``: the W3C
    trace context of the enqueuing span, stored for the worker's span."""
    return (
        spec.kind,
        spec.carry,
        spec.priority,
        spec.at,
        spec.after,
        spec.key,
        spec.max_failures,
        *_backoff_args(spec),
        spec.unique_for,
        on_conflict == "replace",
        traceparent,
    )


def _check_conflict(spec: NewJob, job_id: int, outcome: str, on_conflict: str) -> None:
    if on_conflict == "raise" and outcome != "inserted":
        assert spec.key is not None
        raise DuplicateJob(job_id, spec.kind, spec.key)


def _undo_query(specs: Sequence[NewJob], ids: Sequence[int]) -> Query:
    """``job_undo_insert_if_key_finished``: delete the jobs just inserted (``ids``, of
    ``specs``, in this transaction) whose key's holder finished within their
    ``unique_for`` after all; its rows map an inserted id to its holder."""
    return Query(
        "job_undo_insert_if_key_finished",
        (
            list(ids),
            [s.kind for s in specs],
            [s.key for s in specs],
            [s.unique_for for s in specs],
        ),
    )


def _windowed(spec: NewJob) -> bool:
    """Does the insert need its unique_for check after it, in the same transaction?"""
    return spec.unique_for is not None and spec.key is not None


def job_insert_steps(
    *, spec: NewJob, on_conflict: str = "existing", traceparent: str | None = None
) -> Steps[int]:
    """Insert one job, or find the holder of its key (unfinished, or finished within the
    spec's ``unique_for``); its id. ``on_conflict``: ``existing`` returns the holder,
    ``raise`` raises ``DuplicateJob``, ``replace`` also gives a pending holder this
    spec's carry, priority and visible time (a claimed or finished one is left alone).
    Run ``atomic`` when ``_windowed``: a job the check undoes is never seen."""
    query = Query("job_insert", job_insert_args(spec, on_conflict, traceparent))
    # No id means the key's holder committed after our snapshot; try again.
    for _ in range(5):
        rows = yield query
        if not rows or rows[0]["id"] is None:
            continue
        job_id, outcome = int(rows[0]["id"]), str(rows[0]["outcome"])
        if outcome == "inserted" and _windowed(spec):
            undone = yield _undo_query([spec], [job_id])
            if undone:
                job_id, outcome = int(undone[0]["holder"]), "finished"
        _check_conflict(spec, job_id, outcome, on_conflict)
        return job_id
    raise RuntimeError(f"could not enqueue {spec.kind!r} with key {spec.key!r}: key kept changing")


async def job_insert(
    conn: Any,
    *,
    schema: str,
    spec: NewJob,
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> int:
    """``job_insert_steps`` on an async connection (``drivers.AsyncConnection``)."""
    steps = job_insert_steps(spec=spec, on_conflict=on_conflict, traceparent=traceparent)
    return await drivers.run(conn, steps, schema=schema, atomic=_windowed(spec))


def job_insert_sync(
    conn: Any,
    *,
    schema: str,
    spec: NewJob,
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> int:
    """``job_insert_steps`` on a sync connection (``drivers.SyncConnection``)."""
    steps = job_insert_steps(spec=spec, on_conflict=on_conflict, traceparent=traceparent)
    return drivers.run_sync(conn, steps, schema=schema, atomic=_windowed(spec))


def _backoff_arrays(specs: Sequence[NewJob]) -> list[list[Any]]:
    """The base, factor, cap and jitter arrays of the specs' declared backoffs."""
    rows = [_backoff_args(s) for s in specs]
    return [[r[i] for r in rows] for i in range(4)]


def _same_key(specs: Sequence[NewJob], on_conflict: str) -> tuple[list[NewJob], dict[int, int]]:
    """The specs to send and, for rows whose key an earlier row of the batch holds, the
    index of that row (``replace``: sent once, with the last row's values)."""
    first: dict[tuple[str, str], int] = {}
    sent = list(specs)
    alias: dict[int, int] = {}
    for i, s in enumerate(specs):
        if s.key is None:
            continue
        held = first.setdefault((s.kind, s.key), i)
        if held == i:
            continue
        if on_conflict == "raise":
            raise ConfigError(
                f"enqueue_many: key {s.key!r} of kind {s.kind!r} appears more than once in "
                "the batch (on_conflict='raise')"
            )
        if on_conflict == "replace":
            alias[i] = held
            sent[held] = s
    return sent, alias


def job_insert_many_unkeyed_steps(
    *, specs: Sequence[NewJob], traceparent: str | None = None
) -> Steps[list[int]]:
    """Insert jobs that carry no key in one statement (all or nothing by itself, and no
    key to wait on); their ids in input order."""
    rows = yield Query(
        "job_insert_many_unkeyed",
        (
            [s.kind for s in specs],
            [s.carry for s in specs],
            [s.priority for s in specs],
            [s.at for s in specs],
            [s.after for s in specs],
            [s.max_failures for s in specs],
            *_backoff_arrays(specs),
            traceparent,
        ),
    )
    # Ascending ids are input order (see the statement's header).
    return sorted(int(r["id"]) for r in rows)


def job_insert_many_steps(
    *, specs: Sequence[NewJob], on_conflict: str = "existing", traceparent: str | None = None
) -> Steps[list[int]]:
    """Insert keyed jobs; their ids in input order. Run ``atomic``: a key whose holder
    commits while the statement waits on it comes back without an id and the statement
    runs again for those rows, and a batch that cannot finish (or raises
    ``DuplicateJob``) leaves nothing behind."""
    sent, alias = _same_key(specs, on_conflict)
    ids: list[int | None] = [None] * len(specs)
    # Rows inserted with unique_for, checked once all are in (see job_insert_steps).
    windowed: list[int] = []
    todo = [i for i in range(len(specs)) if i not in alias]
    for _ in range(5):
        rows = yield Query(
            "job_insert_many",
            (
                [sent[i].kind for i in todo],
                [sent[i].carry for i in todo],
                [sent[i].priority for i in todo],
                [sent[i].at for i in todo],
                [sent[i].after for i in todo],
                [sent[i].key for i in todo],
                [sent[i].max_failures for i in todo],
                *_backoff_arrays([sent[i] for i in todo]),
                [sent[i].unique_for for i in todo],
                on_conflict == "replace",
                traceparent,
            ),
        )
        for i, row in zip(todo, rows, strict=True):
            ids[i] = None if row["id"] is None else int(row["id"])
            if row["id"] is not None:
                _check_conflict(sent[i], int(row["id"]), str(row["outcome"]), on_conflict)
                if row["outcome"] == "inserted" and sent[i].unique_for is not None:
                    windowed.append(i)
        todo = [i for i in todo if ids[i] is None]
        if todo:
            continue
        if windowed:
            answer = yield _undo_query(
                [sent[i] for i in windowed], [int(ids[i] or 0) for i in windowed]
            )
            undone = {int(r["id"]): int(r["holder"]) for r in answer}
            for i in windowed:
                holder = undone.get(int(ids[i] or 0))
                if holder is not None:
                    _check_conflict(sent[i], holder, "finished", on_conflict)
                    ids[i] = holder
            # Later rows of the batch given an undone row's id get its holder's.
            for i, job_id in enumerate(ids):
                if job_id in undone:
                    ids[i] = undone[job_id]
        for i, held in alias.items():
            ids[i] = ids[held]
        return [int(i) for i in ids if i is not None]
    s = specs[todo[0]]
    raise RuntimeError(f"could not enqueue {s.kind!r} with key {s.key!r}: key kept changing")


def _many(
    specs: Sequence[NewJob], on_conflict: str, traceparent: str | None
) -> tuple[Steps[list[int]], bool]:
    """The steps of an insert of ``specs`` and whether they must run atomic."""
    if all(s.key is None for s in specs):
        return job_insert_many_unkeyed_steps(specs=specs, traceparent=traceparent), False
    steps = job_insert_many_steps(specs=specs, on_conflict=on_conflict, traceparent=traceparent)
    return steps, True


# An unkeyed batch at least this large goes by binary COPY (``job_copy_in``) on asyncpg:
# below it, COPY's extra round trips (ids, column types, the COPY itself) cost what its
# cheaper encoding saves (benchmarks/bulk.py measures the crossover).
COPY_MIN_ROWS = 10_000

# The columns a COPY writes; the others take their defaults, as in an INSERT.
COPY_COLUMNS = (
    "id",
    "kind",
    "carry",
    "priority",
    "visible_at",
    "max_failures",
    "backoff_base",
    "backoff_factor",
    "backoff_cap",
    "backoff_jitter",
    "traceparent",
)


def _copies(conn: Any) -> bool:
    """Can ``conn`` COPY in a transaction (an asyncpg Connection or Pool)?"""
    return hasattr(conn, "copy_records_to_table") and (
        hasattr(conn, "transaction") or hasattr(conn, "acquire")
    )


async def job_insert_many(
    conn: Any,
    *,
    schema: str,
    specs: Sequence[NewJob],
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> list[int]:
    """Insert jobs all or nothing; their ids in input order. Without keys this is one
    ``job_insert_many_unkeyed`` (or, for a large batch on asyncpg, ``job_copy_in``); with
    keys, ``job_insert_many`` in a transaction (a savepoint inside the caller's), run
    again for the rows whose key holder moved. ``on_conflict`` as for ``job_insert``;
    ``raise`` rolls the whole batch back."""
    if all(s.key is None for s in specs) and len(specs) >= COPY_MIN_ROWS and _copies(conn):
        return await job_copy_in(conn, schema=schema, specs=specs, traceparent=traceparent)
    steps, atomic = _many(specs, on_conflict, traceparent)
    return await drivers.run(conn, steps, schema=schema, atomic=atomic)


def job_insert_many_sync(
    conn: Any,
    *,
    schema: str,
    specs: Sequence[NewJob],
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> list[int]:
    """``job_insert_many`` on a sync connection."""
    steps, atomic = _many(specs, on_conflict, traceparent)
    return drivers.run_sync(conn, steps, schema=schema, atomic=atomic)


@needs_schema
async def job_copy_in(
    conn: Any, *, schema: str, specs: Sequence[NewJob], traceparent: str | None = None
) -> list[int]:
    """Insert unkeyed jobs by binary COPY, all or nothing, in one transaction (a savepoint
    inside the caller's); their ids in input order.

    ``job_ids_draw`` gives the ids and the transaction's clock; asyncpg's
    ``copy_records_to_table`` writes the rows (it builds the ``COPY ... FROM STDIN
    (FORMAT binary)`` from the table and ``COPY_COLUMNS``, identifiers only). The table's
    checks and defaults apply as in an INSERT, and its statement trigger sends the one
    notification of the batch."""
    if any(s.key is not None for s in specs):
        raise ValueError("job_copy_in takes unkeyed jobs only (keys need job_insert_many)")
    async with transaction(conn) as tx:
        row = await tx.fetchrow(sql.statement("job_ids_draw", schema), len(specs))
        assert row is not None  # one row, always
        now, ids = row["now"], row["ids"]
        records = []
        for job_id, s in zip(ids, specs, strict=True):
            at = s.at
            if at is None:
                at = now if s.after is None else now + timedelta(seconds=s.after)
            b = s.backoff
            records.append(
                (job_id, s.kind, s.carry, s.priority, at, s.max_failures)
                + ((None, None, None, None) if b is None else (b.base, b.factor, b.cap, b.jitter))
                + (traceparent,)
            )
        await tx.copy_records_to_table(  # type: ignore[attr-defined]
            "jobs", schema_name=schema, columns=COPY_COLUMNS, records=records
        )
    return [int(i) for i in ids]


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
    replan: bool = False,
) -> ClaimAnswer:
    """Settle ``done`` (id, attempt, result) as completed, recover expired claims (a CTE,
    ``_recover_cte``; ``backoff`` for tasks that declared none) and claim up to ``limit``
    jobs of ``kinds`` at priority ``floor`` or above, in one statement and one commit.

    On the worker loop's held connection the statement keeps its generic plan, and
    ``replan`` (the last claim came back full) lets it be planned anew against the
    table as it is now (``Held.fetch_planned``)."""
    if isinstance(conn, Held):
        run: Any = functools.partial(conn.fetch_planned, replan=replan)
    else:
        run = conn.fetch
    rows = await run(
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


async def job_next_visible_at(
    conn: Conn, *, schema: str, kinds: Sequence[str]
) -> tuple[datetime | None, datetime | None]:
    """When the next pending job of ``kinds`` becomes visible (due ones included), and
    the earliest timer of their waiting workflows (``db.workflow.job_wake_due``)."""
    row = await conn.fetchrow(sql.statement("job_next_visible_at", schema), kinds)
    if row is None:
        return None, None
    return row["next_visible_at"], row["next_wake_at"]


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
    dead_reason: str | None = None,
) -> str | None:
    """Settle a failed execution (``event`` failed, timed-out or retried); returns the new
    status (pending or dead), or None if the claim was lost. ``force_dead`` settles dead
    at once, journaled with ``dead_reason`` (None: the failures_to_dead reason)."""
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
        dead_reason,
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


def job_get_steps(*, job_id: int) -> Steps[Row | None]:
    """One job's row, or None."""
    rows = yield Query("job_get", (job_id,))
    return rows[0] if rows else None


async def job_get(conn: Any, *, schema: str, job_id: int) -> Row | None:
    return await drivers.run(conn, job_get_steps(job_id=job_id), schema=schema)


async def job_mark_awaited(conn: Conn, *, schema: str, job_id: int) -> None:
    """Mark an unfinished job as waited for: it notifies ``sql.finished_channel`` when it
    finishes."""
    await conn.execute(sql.statement("job_mark_awaited", schema), job_id)


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


async def job_set_priority_many_if_pending(
    conn: Conn, *, schema: str, ids: Sequence[int], priority: int, operator: str, detail: str
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_set_priority_many_if_pending", schema),
            ids,
            priority,
            operator,
            detail,
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
