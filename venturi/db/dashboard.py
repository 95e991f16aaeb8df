"""The dashboard's reads (``venturi.web``): its session settings and the statements only
its pages run. Every function runs one named statement."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn, Record


async def dashboard_read_settings(conn: Conn, *, schema: str) -> None:
    """Plan the page's statements with their parameters, without JIT (a bad row estimate
    made it compile for longer than the query ran)."""
    await conn.execute(sql.statement("maintenance/dashboard_read_settings", schema))


async def dashboard_read_serial(conn: Conn, *, schema: str) -> None:
    """No parallel workers for this transaction's reads (every read but a full count)."""
    await conn.execute(sql.statement("maintenance/dashboard_read_serial", schema))


async def job_overview(
    conn: Conn, *, schema: str, manual_detail: str, window: float
) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_overview", schema), manual_detail, window))


async def job_activity_per_minute(
    conn: Conn, *, schema: str, manual_detail: str, minutes: int
) -> list[Record]:
    return list(
        await conn.fetch(sql.statement("job_activity_per_minute", schema), manual_detail, minutes)
    )


async def job_list_claimed(conn: Conn, *, schema: str, limit: int) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_list_claimed", schema), limit))


async def schedule_list_all(conn: Conn, *, schema: str) -> list[Record]:
    return list(await conn.fetch(sql.statement("schedule_list_all", schema)))


async def job_search_older(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    before: int | None,
    limit: int,
    group: str | None = None,
) -> list[Record]:
    text = sql.statement("job_search_older", schema)
    return list(await conn.fetch(text, status, kind, key, before, limit, group))


async def job_search_newer(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    after: int,
    limit: int,
    group: str | None = None,
) -> list[Record]:
    text = sql.statement("job_search_newer", schema)
    return list(await conn.fetch(text, status, kind, key, after, limit, group))


async def job_search_count(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    key: str | None,
    cap: int,
    group: str | None = None,
) -> int:
    text = sql.statement("job_search_count", schema)
    return int(await conn.fetchval(text, status, kind, key, cap, group))


async def job_activity_of_kind(
    conn: Conn, *, schema: str, kind: str, manual_detail: str, bucket: float, buckets: int
) -> list[Record]:
    text = sql.statement("job_activity_of_kind", schema)
    return list(await conn.fetch(text, kind, manual_detail, bucket, buckets))


async def group_list_by_claimed(
    conn: Conn, *, schema: str, kind: str, search: str | None, limit: int, offset: int
) -> list[Record]:
    text = sql.statement("group_list_by_claimed", schema)
    return list(await conn.fetch(text, kind, search, limit, offset))
