"""The dashboard's search (``venturi.admin.search``): resolving a search box's text, the
pages and totals of a search, and the search index's pass (its horizon and one batch).
Every function runs one named statement, but ``job_search_index_all``: the pass in
batches that an operator runs by hand and a worker's maintenance on its timer."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from venturi import sql
from venturi.db.conn import Conn, Record

# The search index's pass: finished jobs indexed per batch (each batch its own
# transaction), and the oldest open transaction it waits for, in seconds
# (statements/job_search_horizon.sql.j2).
INDEX_BATCH = 5000
INDEX_PATIENCE = 600.0
# How far behind the clock it stays at least (a transaction's start reaches
# pg_stat_activity a moment after its now(); another role's may not show at all).
INDEX_MARGIN = 1.0


async def job_search_query(conn: Conn, *, schema: str, search: str) -> Record:
    """``search`` resolved: query (its tsquery's text, None without a word), patterns
    (a LIKE pattern per word) and the index's watermark (indexed_at, indexed_id)."""
    return await conn.fetchrow(sql.statement("job_search_query", schema), search)


def _args(
    status: str | None,
    kind: str | None,
    key: str | None,
    search: str | None,
    kinds: list[str],
    patterns: list[str],
    indexed_at: datetime,
    indexed_id: int,
    group: str | None = None,
) -> tuple[Any, ...]:
    """The nine parameters every search statement takes first (_job_search_text.sql.j2)."""
    return (status, kind, key, search, kinds, patterns, indexed_at, indexed_id, group)


async def job_search_text_older(
    conn: Conn, *, schema: str, before: int | None, limit: int, **search: Any
) -> list[int]:
    """The ids of the known kinds' and the indexed jobs of a page, newest first.
    ``search``: status, kind, key, search, kinds, patterns, indexed_at, indexed_id."""
    text = sql.statement("job_search_text_older", schema)
    return [r["id"] for r in await conn.fetch(text, *_args(**search), before, limit)]


async def job_search_text_newer(
    conn: Conn, *, schema: str, after: int, limit: int, **search: Any
) -> list[int]:
    """As ``job_search_text_older`` above ``after``, oldest first."""
    text = sql.statement("job_search_text_newer", schema)
    return [r["id"] for r in await conn.fetch(text, *_args(**search), after, limit)]


async def job_search_text_live_older(
    conn: Conn, *, schema: str, before: int | None, bound: int | None, limit: int, **search: Any
) -> list[Record]:
    """The jobs not indexed of a page (id, kind), newest first, above ``bound``."""
    text = sql.statement("job_search_text_live_older", schema)
    return list(await conn.fetch(text, *_args(**search), before, bound, limit))


async def job_search_text_live_newer(
    conn: Conn, *, schema: str, after: int, bound: int | None, limit: int, **search: Any
) -> list[Record]:
    """As ``job_search_text_live_older`` above ``after`` and below ``bound``, oldest first."""
    text = sql.statement("job_search_text_live_newer", schema)
    return list(await conn.fetch(text, *_args(**search), after, bound, limit))


async def job_search_rows(conn: Conn, *, schema: str, ids: list[int]) -> list[Record]:
    """The rows of these jobs, newest first."""
    return list(await conn.fetch(sql.statement("job_search_rows", schema), ids))


async def job_search_text_count(conn: Conn, *, schema: str, cap: int, **search: Any) -> int:
    text = sql.statement("job_search_text_count", schema)
    return int(await conn.fetchval(text, *_args(**search), cap))


async def job_count_matching_search(conn: Conn, *, schema: str, **search: Any) -> Record:
    """How many jobs a search matches (exactly), and the newest of them."""
    text = sql.statement("job_count_matching_search", schema)
    return await conn.fetchrow(text, *_args(**search))


async def job_ids_matching_search(
    conn: Conn, *, schema: str, before: int, limit: int, **search: Any
) -> list[int]:
    text = sql.statement("job_ids_matching_search", schema)
    return [r["id"] for r in await conn.fetch(text, *_args(**search), before, limit)]


async def job_search_horizon(
    conn: Conn, *, schema: str, patience: float, margin: float
) -> datetime:
    """How far the index may go now (read before, and apart from, a batch)."""
    text = sql.statement("job_search_horizon", schema)
    value: datetime = await conn.fetchval(text, patience, margin)
    return value


async def job_search_index_batch(
    conn: Conn, *, schema: str, horizon: datetime, batch: int
) -> Record:
    """One batch of the index: indexed (how many jobs), locked (False: another pass
    held the watermark)."""
    return await conn.fetchrow(sql.statement("job_search_index_batch", schema), horizon, batch)


async def job_search_index_all(
    conn: Conn,
    *,
    schema: str,
    batch: int,
    patience: float,
    margin: float,
    budget: float | None,
) -> tuple[int, bool]:
    """Index batches until caught up (or another pass holds the watermark) or ``budget``
    seconds have passed: how many jobs were indexed, and whether it caught up."""
    indexed = 0
    started = time.monotonic()
    while True:
        horizon = await job_search_horizon(conn, schema=schema, patience=patience, margin=margin)
        row = await job_search_index_batch(conn, schema=schema, horizon=horizon, batch=batch)
        indexed += row["indexed"]
        if not row["locked"] or row["indexed"] < batch:
            return indexed, True
        if budget is not None and time.monotonic() - started >= budget:
            return indexed, False
