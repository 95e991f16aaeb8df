"""Enqueue: the application's inserts, written once as driver-neutral steps.

``JobSpec`` is what an enqueue writes (``Task.job`` builds one; ``venturi.JobSpec``).
``job_insert`` and ``job_insert_many`` (async, any driver ``drivers.run`` takes) and their
``_sync`` twins are the same steps (``drivers.Steps``) on another seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from venturi import sql
from venturi.backoff import Backoff
from venturi.db import drivers
from venturi.db.connect import transaction
from venturi.db.drivers import Query, Steps
from venturi.db.schema import needs_schema
from venturi.errors import ConfigError, DuplicateJob


class JobSpec(msgspec.Struct, frozen=True, gc=False):
    """One job to insert, built by ``Task.job`` for ``venturi.enqueue_many``. Untracked by
    the garbage collector (``gc=False``): its fields are strings, numbers, a datetime and
    a ``Backoff``, none of which can lead back to it, and a bulk enqueue makes one per job
    (each tracked allocation brings the next collection nearer)."""

    kind: str
    carry: str
    priority: int
    at: datetime | None
    after: float | None
    key: str | None
    max_failures: int
    # The task's declared Backoff, stored for recovery; None: the worker's default.
    backoff: Backoff | None = None
    # The task's unique_for: seconds a finished job still holds the key (None: none).
    unique_for: float | None = None
    # The job's group (SPEC 13; None: none), checked by venturi.groups.check_group.
    group: str | None = None


ON_CONFLICT = ("existing", "raise", "replace")


def backoff_args(spec: JobSpec) -> tuple[float | None, float | None, float | None, bool | None]:
    """The base, factor, cap and jitter of the spec's declared backoff (NULLs for none)."""
    b = spec.backoff
    return (None, None, None, None) if b is None else (b.base, b.factor, b.cap, b.jitter)


def job_insert_args(
    spec: JobSpec, on_conflict: str = "existing", traceparent: str | None = None
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
        *backoff_args(spec),
        spec.unique_for,
        on_conflict == "replace",
        traceparent,
        spec.group,
    )


def _check_conflict(spec: JobSpec, job_id: int, outcome: str, on_conflict: str) -> None:
    if on_conflict == "raise" and outcome != "inserted":
        assert spec.key is not None
        raise DuplicateJob(job_id, spec.kind, spec.key)


def _undo_query(specs: Sequence[JobSpec], ids: Sequence[int]) -> Query:
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


def _windowed(spec: JobSpec) -> bool:
    """Does the insert need its unique_for check after it, in the same transaction?"""
    return spec.unique_for is not None and spec.key is not None


def job_insert_steps(
    *, spec: JobSpec, on_conflict: str = "existing", traceparent: str | None = None
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
    spec: JobSpec,
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
    spec: JobSpec,
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> int:
    """``job_insert_steps`` on a sync connection (``drivers.SyncConnection``)."""
    steps = job_insert_steps(spec=spec, on_conflict=on_conflict, traceparent=traceparent)
    return drivers.run_sync(conn, steps, schema=schema, atomic=_windowed(spec))


def column(values: Sequence[Any]) -> list[Any] | None:
    """One column of a multi-row insert as the array it binds, or NULL when every value
    is NULL: the statements read their arrays with one multi-array ``unnest``, which pads
    a NULL array with NULLs to the others' length. Most batches leave several columns
    empty (no ``at``, no ``after``, no declared backoff), and each element of an array
    costs the driver's encoding and the server's decoding (a bulk enqueue of 1,000 binds
    10,000 elements otherwise: benchmarks/README.md, "Bulk enqueue: a column of NULLs
    binds as one NULL")."""
    return None if all(v is None for v in values) else list(values)


def uniform(values: Sequence[Any]) -> tuple[list[Any] | None, Any]:
    """One column of a multi-row insert that a statement binds twice, as an array and as
    one value for every row: ``(the array, None)``, or ``(None, the value)`` when every row
    holds the same one. A batch of one task (``task.job`` for many carries) has one kind,
    one priority and one failure backstop, and each element of an array costs the
    driver's encoding and the server's decoding (benchmarks/JOURNAL.md, "a batch's
    uniform columns bind one value")."""
    if not values:
        return [], None
    first = values[0]
    for v in values:
        if v != first:
            return list(values), None
    return None, first


def json_array(texts: list[str]) -> str:
    """One JSON array of JSON texts (each a checked carry), as a statement binds a batch's
    carries: one value for the driver to encode rather than an array of as many."""
    return "[" + ",".join(texts) + "]"


def backoff_arrays(specs: Sequence[JobSpec]) -> list[list[Any] | None]:
    """The base, factor, cap and jitter arrays of the specs' declared backoffs (NULLs for
    a spec that declares none; one NULL for a column of NULLs), as every multi-row insert
    binds them."""
    if all(s.backoff is None for s in specs):
        # The common batch: no task of it declares a backoff (four NULLs, built without
        # a tuple per row and four scans of the columns they would make).
        return [None, None, None, None]
    rows = [backoff_args(s) for s in specs]
    return [column([r[i] for r in rows]) for i in range(4)]


def batch_columns(specs: Sequence[JobSpec]) -> list[Any]:
    """The kind, carry, priority, at, after, max_failures and four backoff arrays of a
    multi-row insert of ``specs``, in that order, as ``workflow_insert`` binds them
    (``job_insert_many`` binds its keys between after and max_failures, and its rows are
    a subset, so it lists its own; ``job_insert_many_unkeyed`` binds its uniform columns
    as one value)."""
    return [
        [s.kind for s in specs],
        [s.carry for s in specs],
        [s.priority for s in specs],
        column([s.at for s in specs]),
        column([s.after for s in specs]),
        [s.max_failures for s in specs],
        *backoff_arrays(specs),
    ]


def _same_key(specs: Sequence[JobSpec], on_conflict: str) -> tuple[list[JobSpec], dict[int, int]]:
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
    *, specs: Sequence[JobSpec], traceparent: str | None = None
) -> Steps[list[int]]:
    """Insert jobs that carry no key in one statement (all or nothing by itself, and no
    key to wait on); their ids in input order."""
    kinds, kind = uniform([s.kind for s in specs])
    priorities, priority = uniform([s.priority for s in specs])
    failures, max_failures = uniform([s.max_failures for s in specs])
    rows = yield Query(
        "job_insert_many_unkeyed",
        (
            kinds,
            json_array([s.carry for s in specs]),
            priorities,
            column([s.at for s in specs]),
            column([s.after for s in specs]),
            failures,
            *backoff_arrays(specs),
            traceparent,
            column([s.group for s in specs]),
            kind,
            priority,
            max_failures,
        ),
    )
    # One array of the ids, ascending, which is input order (see the statement's header).
    return [int(i) for i in rows[0]["ids"]]


def job_insert_many_steps(
    *, specs: Sequence[JobSpec], on_conflict: str = "existing", traceparent: str | None = None
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
                column([sent[i].at for i in todo]),
                column([sent[i].after for i in todo]),
                [sent[i].key for i in todo],
                [sent[i].max_failures for i in todo],
                *backoff_arrays([sent[i] for i in todo]),
                column([sent[i].unique_for for i in todo]),
                on_conflict == "replace",
                traceparent,
                column([sent[i].group for i in todo]),
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
    specs: Sequence[JobSpec], on_conflict: str, traceparent: str | None
) -> tuple[Steps[list[int]], bool]:
    """The steps of an insert of ``specs`` and whether they must run atomic."""
    if all(s.key is None for s in specs):
        return job_insert_many_unkeyed_steps(specs=specs, traceparent=traceparent), False
    steps = job_insert_many_steps(specs=specs, on_conflict=on_conflict, traceparent=traceparent)
    return steps, True


# An unkeyed batch at least this large goes by binary COPY (``job_copy_in``) on asyncpg:
# below it, COPY's extra round trips (ids, column types, the COPY itself) cost what its
# cheaper encoding saves (benchmarks/scenarios/bulk.py measures the crossover).
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
    "grp",
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
    specs: Sequence[JobSpec],
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
    specs: Sequence[JobSpec],
    on_conflict: str = "existing",
    traceparent: str | None = None,
) -> list[int]:
    """``job_insert_many`` on a sync connection."""
    steps, atomic = _many(specs, on_conflict, traceparent)
    return drivers.run_sync(conn, steps, schema=schema, atomic=atomic)


@needs_schema
async def job_copy_in(
    conn: Any, *, schema: str, specs: Sequence[JobSpec], traceparent: str | None = None
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
                + (traceparent, s.group)
            )
        await tx.copy_records_to_table(  # type: ignore[attr-defined]
            "jobs", schema_name=schema, columns=COPY_COLUMNS, records=records
        )
    return [int(i) for i in ids]


def job_rank_set_steps(*, job_id: int, rank: int) -> Steps[datetime | None]:
    """Set a job's rank, its order within its tier (lower first), in the transaction that
    inserted it; its ``created_at``, or None when there is no such job."""
    rows = yield Query("job_rank_set", (job_id, rank))
    return rows[0]["created_at"] if rows else None


def job_rank_set_sync(conn: Any, *, schema: str, job_id: int, rank: int) -> datetime | None:
    """``job_rank_set_steps`` on a sync connection (Django's), joining its transaction."""
    return drivers.run_sync(conn, job_rank_set_steps(job_id=job_id, rank=rank), schema=schema)
