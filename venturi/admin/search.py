"""Finding jobs, the dashboard's way: a page of a filter (status, kind, exact key and a
search box over kind, key, last error and carry) paged both ways, its total up to a cap,
the known kinds for a picker, and one kind's activity over a period."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.common import check_ids, check_status
from venturi.admin.jobs import JobRow
from venturi.admin.kinds import list_kinds
from venturi.db.conn import Conn
from venturi.db.search import INDEX_BATCH, INDEX_MARGIN, INDEX_PATIENCE
from venturi.errors import ConfigError
from venturi.groups import check_group
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import MANUAL_RETRY

# What venturi.admin exports from here.
__all__ = [
    "COUNT_CAP",
    "PERIODS",
    "Bucket",
    "Indexed",
    "JobFilter",
    "JobPage",
    "Search",
    "index_search",
    "kind_activity",
    "known_kinds",
    "resolve_search",
    "search_jobs",
]

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
    word of the job's kind, key, last error (its end) or carry (its start); ``group``:
    jobs of that group only (SPEC 13)."""

    status: str | None = None
    kind: str | None = None
    key: str | None = None
    search: str | None = None
    group: str | None = None


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
    (None: it holds none), ``kinds``, the known kinds that begin with the text,
    ``patterns``, a LIKE pattern per word (tested before a document is computed), and the
    search index's watermark (``indexed_at``, ``indexed_id``): the jobs finished up to it
    are read through the index, the others row by row."""

    query: str | None
    kinds: list[str]
    patterns: list[str]
    indexed_at: datetime
    indexed_id: int

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
    row = await db.search.job_search_query(conn, schema=schema, search=text)
    kinds = [k for k in await known_kinds(conn, schema=schema) if k.startswith(text)]
    return Search(row["query"], kinds, list(row["patterns"]), row["indexed_at"], row["indexed_id"])


def search_args(f: JobFilter, found: Search) -> dict[str, Any]:
    """The search statements' keyword arguments for ``f`` and its resolved search."""
    return {
        "status": f.status,
        "kind": f.kind,
        "key": f.key,
        "search": found.query,
        "kinds": found.kinds,
        "patterns": found.patterns,
        "indexed_at": found.indexed_at,
        "indexed_id": found.indexed_id,
        "group": f.group,
    }


class _Live(msgspec.Struct):
    """The jobs not indexed that a search matches, newest first, read once for a page's
    total: all of them, or (``floor`` not None) every one with an id of ``floor`` or
    more."""

    ids: list[int]
    floor: int | None

    def older(self, before: int | None, bound: int | None, n: int) -> list[int] | None:
        """Those of a page older than ``before``, above ``bound``; None if it may lack some."""
        found = [
            i for i in self.ids if (before is None or i < before) and (bound is None or i > bound)
        ][:n]
        exact = self.floor is None or len(found) == n or (bound is not None and bound >= self.floor)
        return found if exact else None

    def newer(self, after: int, bound: int | None, n: int) -> list[int] | None:
        """Those of a page newer than ``after``, below ``bound``; None if it may lack some."""
        if self.floor is not None and after < self.floor:
            return None
        return sorted(i for i in self.ids if i > after and (bound is None or i < bound))[:n]


async def _text_total(
    conn: Conn, f: JobFilter, found: Search, schema: str
) -> tuple[int, _Live | None]:
    """How many jobs a search matches, up to ``COUNT_CAP + 1``: the known kinds' and the
    indexed ones counted, then, unless they reach the cap, the jobs not indexed read (and
    kept for the page)."""
    args = search_args(f, found)
    total = await db.search.job_search_text_count(conn, schema=schema, **args, cap=COUNT_CAP + 1)
    if total > COUNT_CAP or found.query is None:
        return total, None
    rows = await db.search.job_search_text_live_older(
        conn, schema=schema, **args, before=None, bound=None, limit=COUNT_CAP + 1
    )
    kinds = set(found.kinds)
    # A job of a known kind is counted already; every row is a match, so as many rows
    # as the cap allows make the total reach it.
    total = max(total + sum(1 for r in rows if r["kind"] not in kinds), len(rows))
    ids = [r["id"] for r in rows]
    return total, _Live(ids, ids[-1] if len(ids) > COUNT_CAP else None)


async def _live_ids(
    conn: Conn,
    args: dict[str, Any],
    cursors: tuple[int | None, int | None],
    bound: int | None,
    n: int,
    live: _Live | None,
    schema: str,
) -> list[int]:
    """The jobs not indexed of a page, from those the total read when they serve."""
    before, after = cursors
    if after is not None:
        kept = None if live is None else live.newer(after, bound, n)
        if kept is not None:
            return kept
        rows = await db.search.job_search_text_live_newer(
            conn, schema=schema, **args, after=after, bound=bound, limit=n
        )
    else:
        kept = None if live is None else live.older(before, bound, n)
        if kept is not None:
            return kept
        rows = await db.search.job_search_text_live_older(
            conn, schema=schema, **args, before=before, bound=bound, limit=n
        )
    return [r["id"] for r in rows]


async def _text_page(
    conn: Conn,
    f: JobFilter,
    found: Search,
    cursors: tuple[int | None, int | None],
    n: int,
    schema: str,
    live: _Live | None,
) -> list[Any]:
    """``n`` rows of a search's page: the known kinds' and indexed jobs of the page, then
    the jobs not indexed up to its far end (all of them when it is not full), merged."""
    before, after = cursors
    args = search_args(f, found)
    if after is not None:
        ids = await db.search.job_search_text_newer(
            conn, schema=schema, **args, after=after, limit=n
        )
    else:
        ids = await db.search.job_search_text_older(
            conn, schema=schema, **args, before=before, limit=n
        )
    bound = ids[-1] if len(ids) == n else None
    more = (
        [] if found.query is None else await _live_ids(conn, args, cursors, bound, n, live, schema)
    )
    page = sorted(set(ids) | set(more), reverse=after is None)[:n]
    rows = await db.search.job_search_rows(conn, schema=schema, ids=page)
    return rows if after is None else rows[::-1]


async def _page(
    conn: Conn,
    f: JobFilter,
    found: Search | None,
    cursors: tuple[int | None, int | None],
    n: int,
    schema: str,
    live: _Live | None,
) -> list[Any]:
    """``n`` rows of a page, in id order from the cursor (``cursors``: before, after)."""
    before, after = cursors
    if found is not None:
        return await _text_page(conn, f, found, cursors, n, schema, live)
    wanted = {"status": f.status, "kind": f.kind, "key": f.key, "group": f.group}
    if after is not None:
        return await db.dashboard.job_search_newer(
            conn, schema=schema, **wanted, after=after, limit=n
        )
    return await db.dashboard.job_search_older(
        conn, schema=schema, **wanted, before=before, limit=n
    )


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
    if f.group is not None:
        check_group(f.group, new=False)
    found = await resolve_search(conn, f.search, schema=schema)
    if found is not None and not found.possible:
        return JobPage([], None, None, 0, False)
    live = None
    if found is None:
        total = await db.dashboard.job_search_count(
            conn,
            schema=schema,
            status=f.status,
            kind=f.kind,
            key=f.key,
            cap=COUNT_CAP + 1,
            group=f.group,
        )
    else:
        total, live = await _text_total(conn, f, found, schema)
    newer: int | None = None
    rows: list[Any] = []
    if after is not None and before is None:
        rows = await _page(conn, f, found, (None, after), limit + 1, schema, live)
        if len(rows) > limit:
            rows = rows[:limit][::-1]
            newer = rows[0]["id"]
        else:
            rows = []  # less than a page is left above: show the newest page
    if not rows:
        cursor = before if after is None else None
        rows = await _page(conn, f, found, (cursor, None), limit + 1, schema, live)
        if cursor is not None and rows:
            newer = rows[0]["id"]
    older = rows[limit - 1]["id"] if len(rows) > limit else None
    return JobPage(
        [JobRow(**dict(r)) for r in rows[:limit]],
        older,
        newer,
        min(total, COUNT_CAP),
        total > COUNT_CAP,
    )


class Indexed(msgspec.Struct, frozen=True):
    """A pass of the search index: ``jobs`` indexed; ``caught_up``: every job finished
    before the horizon is indexed (or another pass is at it), else the budget ran out."""

    jobs: int
    caught_up: bool


async def index_search(
    conn: Any,
    *,
    batch: int = INDEX_BATCH,
    patience: float = INDEX_PATIENCE,
    margin: float = INDEX_MARGIN,
    budget: float | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> Indexed:
    """Index finished jobs for the dashboard's search, oldest finish first, ``batch`` per
    transaction, until caught up or ``budget`` seconds have passed. Only jobs finished
    before every transaction still open (``patience``: unless open for longer than that)
    and more than ``margin`` seconds ago: the others wait for a later pass, and a search
    reads them row by row meanwhile. ``conn``: a connection (not in a transaction) or a
    pool. Safe in many workers at once: a pass that finds the watermark locked by another
    returns at once."""
    validate.integer(batch, "search index batch")
    return Indexed(
        *await db.search.job_search_index_all(
            conn, schema=schema, batch=batch, patience=patience, margin=margin, budget=budget
        )
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
