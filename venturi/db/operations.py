"""The operators' statements on jobs: list, count and select by filter, retry, cancel,
delete, run now, re-prioritise, the per-kind stats, purge and result expiry; and the
passes in batches that an operator runs by hand and a worker's maintenance on its timer
(``job_purge_all``, ``job_history_move_all``), written here once for both."""

from __future__ import annotations

import time
from collections.abc import Sequence

from venturi import sql
from venturi.db.conn import Conn, Record


async def job_list(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    limit: int,
    key: str | None = None,
    before: int | None = None,
    group: str | None = None,
) -> list[Record]:
    return list(
        await conn.fetch(sql.statement("job_list", schema), status, kind, limit, key, before, group)
    )


async def job_delete_many_if_not_claimed(
    conn: Conn, *, schema: str, ids: Sequence[int]
) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_delete_many_if_not_claimed", schema), ids))


async def job_run_now_many_if_pending(
    conn: Conn,
    *,
    schema: str,
    ids: Sequence[int],
    operator: str,
    detail: str,
    timeout_now: bool = False,
) -> list[Record]:
    return list(
        await conn.fetch(
            sql.statement("job_run_now_many_if_pending", schema),
            ids,
            operator,
            detail,
            timeout_now,
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
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    group: str | None = None,
) -> Record:
    text = sql.statement("job_count_matching", schema)
    return await conn.fetchrow(text, status, kind, key, group)


async def job_ids_matching(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    before: int,
    limit: int,
    group: str | None = None,
) -> list[int]:
    text = sql.statement("job_ids_matching", schema)
    return [r["id"] for r in await conn.fetch(text, status, kind, key, before, limit, group)]


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
    """Delete up to ``batch`` finished jobs of ``status`` from each of the live table and
    the history (their journal, steps and signals with them); how many."""
    return int(
        await conn.fetchval(
            sql.statement("job_purge_batch", schema), status, older_than, kind, batch
        )
    )


async def job_purge_all(
    conn: Conn,
    *,
    schema: str,
    status: str,
    older_than: float,
    kind: str | None,
    batch: int,
) -> int:
    """``job_purge_batch`` until a batch deletes fewer than ``batch`` rows, each batch its
    own statement (so locks stay short); how many were deleted in all."""
    total = 0
    while True:
        deleted = await job_purge_batch(
            conn, schema=schema, status=status, older_than=older_than, kind=kind, batch=batch
        )
        total += deleted
        if deleted < batch:
            return total


# Rows per transaction of the history move: large enough that a database of a million
# finished jobs moves in a couple of minutes, small enough that each batch's row locks last
# well under a second (benchmarks/README.md, "The history table").
MOVE_BATCH = 5000


async def job_history_move(conn: Conn, *, schema: str, after: float, batch: int) -> int:
    """Move up to ``batch`` jobs finished more than ``after`` seconds ago to the history;
    how many."""
    return int(await conn.fetchval(sql.statement("job_history_move", schema), float(after), batch))


async def job_history_move_all(
    conn: Conn, *, schema: str, after: float, batch: int, budget: float | None
) -> tuple[int, bool]:
    """``job_history_move`` until a batch moves fewer than ``batch`` jobs or ``budget``
    seconds have passed: how many moved, and whether none was left (else the budget ran
    out)."""
    moved = 0
    started = time.monotonic()
    while True:
        n = await job_history_move(conn, schema=schema, after=after, batch=batch)
        moved += n
        if n < batch:
            return moved, True
        if budget is not None and time.monotonic() - started >= budget:
            return moved, False


async def job_vacuum_state(conn: Conn, *, schema: str) -> tuple[int, bool]:
    """The live table's dead row versions (statistics' count) and whether this role may
    vacuum it."""
    row = await conn.fetchrow(sql.statement("job_vacuum_state", schema))
    assert row is not None  # the schema is applied
    return int(row["dead"]), bool(row["allowed"])


async def job_vacuum(conn: Conn, *, schema: str) -> None:
    """VACUUM the live table (not in a transaction), unless a vacuum holds it already."""
    await conn.execute(sql.statement("maintenance/job_vacuum", schema))


async def job_statistics_state(
    conn: Conn, *, schema: str, factor: float, minimum: int, enough: int
) -> tuple[bool, bool]:
    """Whether the live table's planner statistics misjudge its backlog (more than
    ``factor`` times the pending rows its last ANALYZE saw, plus ``minimum``, while it saw
    fewer than ``enough``) and whether this role may analyze it."""
    return await _statistics_state(conn, "job_statistics_state", schema, factor, minimum, enough)


async def job_analyze(conn: Conn, *, schema: str) -> None:
    """ANALYZE the live table, unless an ANALYZE or VACUUM holds it already."""
    await conn.execute(sql.statement("maintenance/job_analyze", schema))


async def group_statistics_state(
    conn: Conn, *, schema: str, factor: float, minimum: int, enough: int
) -> tuple[bool, bool]:
    """Whether the groups table's planner statistics misjudge its ready groups (as
    ``job_statistics_state`` for the live table's backlog) and whether this role may
    analyze it."""
    return await _statistics_state(conn, "group_statistics_state", schema, factor, minimum, enough)


async def _statistics_state(
    conn: Conn, statement: str, schema: str, factor: float, minimum: int, enough: int
) -> tuple[bool, bool]:
    row = await conn.fetchrow(sql.statement(statement, schema), factor, minimum, enough)
    assert row is not None  # the schema is applied
    return bool(row["stale"]), bool(row["allowed"])


async def group_analyze(conn: Conn, *, schema: str) -> None:
    """ANALYZE the groups table, unless an ANALYZE or VACUUM holds it already."""
    await conn.execute(sql.statement("maintenance/group_analyze", schema))


async def job_result_clear_expired(
    conn: Conn, *, schema: str, kind: str, ttl: float, batch: int
) -> int:
    """Clear up to ``batch`` results of ``kind`` older than ``ttl`` seconds; how many."""
    return int(
        await conn.fetchval(
            sql.statement("job_result_clear_expired", schema), kind, float(ttl), batch
        )
    )


async def job_children_failed_list(
    conn: Conn, *, schema: str, ids: Sequence[int], limit: int
) -> list[Record]:
    """The dead or cancelled children of ``ids``, and theirs (id, parent_id), id order."""
    return list(await conn.fetch(sql.statement("job_children_failed_list", schema), ids, limit))
