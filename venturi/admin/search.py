"""Finding jobs, the dashboard's way: a page of a filter (status, kind, exact key and a
search box over kind, key, last error and carry) paged both ways, its total up to a cap,
the known kinds for a picker, and one kind's activity over a period."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.common import MANUAL_RETRY, check_ids, check_status
from venturi.admin.jobs import JobRow
from venturi.admin.kinds import list_kinds
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA

# A page's total is counted up to this many jobs ("10,000+" beyond).
COUNT_CAP = 10_000
# The kind picker lists at most this many kinds.
KINDS_SHOWN = 500
# The longest search text taken.
SEARCH_MAX = 200
# A kind page's periods: (seconds per bucket, buckets).
PERIODS = {"1h": (60.0, 60), "24h": (1200.0, 72), "7d": (7200.0, 84)}


class JobFilter(msgspec.Struct, frozen=True):
    """What a list shows: each None for any. ``search``: words that must each begin a
    word of the job's kind, key, last error (its end) or carry (its start)."""

    status: str | None = None
    kind: str | None = None
    key: str | None = None
    search: str | None = None


class JobPage(msgspec.Struct, frozen=True):
    """One page of a filter, newest first. ``older`` / ``newer``: the cursors of the
    neighbouring pages (``before=`` / ``after=``), None at either end; ``total``: the
    jobs the filter matches, at most ``COUNT_CAP`` (``capped`` when there are more)."""

    rows: list[JobRow]
    older: int | None
    newer: int | None
    total: int
    capped: bool


class Search(msgspec.Struct, frozen=True):
    """A search box's text resolved for the statements: ``query``, the tsquery of its words
    (None: it holds none), and ``kinds``, the known kinds that begin with the text."""

    query: str | None
    kinds: list[str]

    @property
    def possible(self) -> bool:
        """Whether any job can match."""
        return self.query is not None or bool(self.kinds)


async def resolve_search(
    conn: Conn, search: str | None, *, schema: str = DEFAULT_SCHEMA
) -> Search | None:
    """``search`` for the statements; None when there is no search (empty text)."""
    if search is None:
        return None
    if not isinstance(search, str) or len(search) > SEARCH_MAX:
        raise ConfigError(f"search must be text of at most {SEARCH_MAX} characters")
    text = search.strip()
    if not text:
        return None
    query = await db.dashboard.job_search_query(conn, schema=schema, search=text)
    kinds = [k for k in await known_kinds(conn, schema=schema) if k.startswith(text)]
    return Search(query, kinds)


def search_args(f: JobFilter, found: Search | None, schema: str) -> dict[str, Any]:
    """The keyword arguments of the search statements for ``f`` and its resolved search."""
    return {
        "schema": schema,
        "status": f.status,
        "kind": f.kind,
        "key": f.key,
        "search": None if found is None else found.query,
        "kinds": None if found is None else found.kinds,
    }


async def _page(
    conn: Conn, args: dict[str, Any], before: int | None, after: int | None, n: int
) -> list[Any]:
    """``n`` rows of a page, in id order from the cursor (a search's words are matched row
    by row: no index reads them, see statements/_job_search.sql.j2)."""
    if after is not None:
        return await db.dashboard.job_search_newer(conn, **args, after=after, limit=n)
    return await db.dashboard.job_search_older(conn, **args, before=before, limit=n)


async def search_jobs(
    conn: Conn,
    f: JobFilter,
    *,
    before: int | None = None,
    after: int | None = None,
    limit: int = 50,
    schema: str = DEFAULT_SCHEMA,
) -> JobPage:
    """One page of the jobs ``f`` matches: the newest, or those just older than
    ``before``, or those just newer than ``after`` (the newest page once none is left)."""
    check_status(f.status)
    validate.integer(limit, "limit")
    for cursor in (before, after):
        if cursor is not None:
            check_ids([cursor])
    found = await resolve_search(conn, f.search, schema=schema)
    if found is not None and not found.possible:
        return JobPage([], None, None, 0, False)
    args = search_args(f, found, schema)
    newer: int | None = None
    rows: list[Any] = []
    if after is not None and before is None:
        rows = await _page(conn, args, None, after, limit + 1)
        if len(rows) > limit:
            rows = rows[:limit][::-1]
            newer = rows[0]["id"]
        else:
            rows = []  # less than a page is left above: show the newest page
    if not rows:
        cursor = before if after is None else None
        rows = await _page(conn, args, cursor, None, limit + 1)
        if cursor is not None and rows:
            newer = rows[0]["id"]
    older = rows[limit - 1]["id"] if len(rows) > limit else None
    total = await db.dashboard.job_search_count(conn, **args, cap=COUNT_CAP + 1)
    return JobPage(
        [JobRow(**dict(r)) for r in rows[:limit]],
        older,
        newer,
        min(total, COUNT_CAP),
        total > COUNT_CAP,
    )


async def known_kinds(
    conn: Conn, *, limit: int = KINDS_SHOWN, schema: str = DEFAULT_SCHEMA
) -> list[str]:
    """The kinds the database knows (``venturi.admin.list_kinds``), in order, at most
    ``limit``: the kind picker's, and those a search's text may begin."""
    return [k.kind for k in await list_kinds(conn, schema=schema)][:limit]


class Bucket(msgspec.Struct, frozen=True):
    """One kind's completions, failed executions and deaths in one bucket of time."""

    minute: datetime
    completed: int
    failures: int
    dead: int


async def kind_activity(
    conn: Conn, kind: str, *, period: str = "1h", schema: str = DEFAULT_SCHEMA
) -> list[Bucket]:
    """``kind``'s activity over ``period`` (one of ``PERIODS``), oldest bucket first,
    every bucket present."""
    if period not in PERIODS:
        raise ConfigError(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    bucket, buckets = PERIODS[period]
    rows = await db.dashboard.job_activity_of_kind(
        conn,
        schema=schema,
        kind=kind,
        manual_detail=MANUAL_RETRY,
        bucket=bucket,
        buckets=buckets,
    )
    return [Bucket(**dict(r)) for r in rows]
