"""Bulk actions on a filter (the dashboard's "retry all 1,204 dead jobs of this kind"):
count what a filter matches, for the operator to confirm, then apply one of ``admin``'s
actions (``venturi.admin.jobs``) to exactly those jobs in batches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

from venturi import db
from venturi.admin.common import Change, check_ids, check_status
from venturi.admin.search import JobFilter, resolve_search, search_args
from venturi.db.conn import Conn
from venturi.groups import check_group
from venturi.sql import DEFAULT_SCHEMA

# What venturi.admin exports from here.
__all__ = [
    "BULK_BATCH",
    "Matching",
    "act_on_matching",
    "count_matching",
]

BULK_BATCH = 500


class Matching(msgspec.Struct, frozen=True):
    """How many jobs a filter matches now, and the newest one's id (None: no match)."""

    jobs: int
    newest_id: int | None


async def count_matching(
    conn: Conn,
    *,
    status: str | None = None,
    kind: str | None = None,
    key: str | None = None,
    search: str | None = None,
    schema: str = DEFAULT_SCHEMA,
    group: str | None = None,
) -> Matching:
    """What a bulk action on this filter would touch: shown to the operator to confirm.
    ``search``: the dashboard's search box (``venturi.admin.search``); ``group``: one
    group's jobs (SPEC 13)."""
    check_status(status)
    if group is not None:
        check_group(group, new=False)
    found = await resolve_search(conn, search, schema=schema)
    if found is None:
        row = await db.operations.job_count_matching(
            conn, schema=schema, status=status, kind=kind, key=key, group=group
        )
    elif not found.possible:
        return Matching(0, None)
    else:
        wanted = JobFilter(status, kind, key, group=group)
        row = await db.search.job_count_matching_search(
            conn, schema=schema, **search_args(wanted, found)
        )
    return Matching(int(row["jobs"]), row["newest_id"])


async def act_on_matching(
    conn: Conn,
    action: Callable[[list[int]], Awaitable[list[Change]]],
    *,
    status: str | None = None,
    kind: str | None = None,
    key: str | None = None,
    search: str | None = None,
    up_to: int,
    batch: int = BULK_BATCH,
    schema: str = DEFAULT_SCHEMA,
    group: str | None = None,
) -> list[Change]:
    """Apply ``action`` (e.g. ``lambda ids: retry_jobs(conn, ids)``) to every job the filter
    matches whose id is at most ``up_to`` (the newest id the operator confirmed, so jobs
    enqueued since are left alone), newest first, ``batch`` ids per statement."""
    check_status(status)
    if group is not None:
        check_group(group, new=False)
    cursor = check_ids([up_to])[0] + 1
    out: list[Change] = []
    found = await resolve_search(conn, search, schema=schema)
    if found is not None and not found.possible:
        return out
    while True:
        if found is None:
            ids = await db.operations.job_ids_matching(
                conn,
                schema=schema,
                status=status,
                kind=kind,
                key=key,
                before=cursor,
                limit=batch,
                group=group,
            )
        else:
            ids = await db.search.job_ids_matching_search(
                conn,
                schema=schema,
                **search_args(JobFilter(status, kind, key, group=group), found),
                before=cursor,
                limit=batch,
            )
        if not ids:
            return out
        out += await action(ids)
        cursor = ids[-1]
