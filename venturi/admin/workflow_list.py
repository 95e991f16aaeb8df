"""The workflows list (the dashboard's /workflows and /api/workflows): the workflow
roots, newest first, filtered by status and kind, paged both ways, each with its
progress.

What counts as a workflow: a **root**, a job without a parent and without dependencies
of its own that recorded a step (``ctx.step``, a timer, a spawn, a signal's deadline),
received a signal, or that ``venturi.Workflow`` nodes come after (a graph's first node).
Its children and later nodes are part of it, not workflows of their own. A job that
waits for a signal before it recorded anything is listed once the signal came (until
then ``/jobs?status=waiting`` shows it). The statements read the steps, signals and
dependencies tables, which hold workflow jobs only, never the plain jobs around them
(statements/_workflow_list.sql.j2)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.common import check_ids, check_status
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA

# What venturi.admin exports from here.
__all__ = [
    "LIST_COUNT_CAP",
    "WorkflowPage",
    "WorkflowRow",
    "list_workflows",
]

# Steps, children and later nodes are counted up to this per row of the list (a root
# with more shows "1,000+"): a page of fifty roots reads at most fifty times this.
LIST_COUNT_CAP = 1_000


class WorkflowRow(msgspec.Struct, frozen=True):
    """A workflow root and its progress: ``steps`` recorded; ``children`` spawned and,
    by outcome, of them ``children_completed``, ``children_failed`` (dead or cancelled)
    and ``children_finished`` (the two together; the rest are open); ``nodes_after``,
    the Workflow nodes that come after it (transitively), counted the same way; each
    counted up to ``cap``. While the root waits: the signal it waits for
    (``wait_signal``), its timer (``wake_at``: a sleep or the signal's timeout) and how
    many jobs it waits for (``wait_count``: children or dependencies); None and 0
    otherwise. ``updated_at``: its latest claim or its end, whichever came last."""

    id: int
    kind: str
    status: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    steps: int
    children: int
    children_completed: int
    children_failed: int
    children_finished: int
    nodes_after: int
    nodes_after_completed: int
    nodes_after_failed: int
    nodes_after_finished: int
    wait_signal: str | None = None
    wake_at: datetime | None = None
    wait_count: int = 0
    cap: int = LIST_COUNT_CAP


def _row(r: Any) -> WorkflowRow:
    fields = dict(r)
    fields["children_finished"] = r["children_completed"] + r["children_failed"]
    fields["nodes_after_finished"] = r["nodes_after_completed"] + r["nodes_after_failed"]
    return WorkflowRow(**fields)


class WorkflowPage(msgspec.Struct, frozen=True):
    """One page of workflow roots, newest first; ``older`` / ``newer`` the cursors of
    the neighbouring pages (``before=`` / ``after=``), None at either end."""

    rows: list[WorkflowRow]
    older: int | None
    newer: int | None


async def _page(
    conn: Conn, args: dict[str, Any], before: int | None, after: int | None, n: int
) -> list[Any]:
    if after is not None:
        return await db.workflow_reads.workflow_list_newer(conn, **args, after=after, limit=n)
    return await db.workflow_reads.workflow_list_older(conn, **args, before=before, limit=n)


async def list_workflows(
    conn: Conn,
    *,
    status: str | None = None,
    kind: str | None = None,
    search: str | None = None,
    before: int | None = None,
    after: int | None = None,
    limit: int = 50,
    schema: str = DEFAULT_SCHEMA,
) -> WorkflowPage:
    """One page of workflow roots of ``status`` and ``kind`` (None: any) that ``search``
    finds (its kind starts with it, its key or id is it, or its last error or carry
    holds it, case-insensitively; None or empty: any): the newest, or
    those just older than ``before``, or those just newer than ``after`` (the newest page
    once less than a page is left above it)."""
    check_status(status)
    validate.integer(limit, "limit")
    for cursor in (before, after):
        if cursor is not None:
            check_ids([cursor])
    if search is not None and (not isinstance(search, str) or len(search) > 200):
        raise ConfigError(f"search must be text of at most 200 characters, got {search!r:.60}")
    args = {
        "schema": schema,
        "status": status,
        "kind": kind,
        "cap": LIST_COUNT_CAP,
        "search": search.strip() or None if search else None,
    }
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
    return WorkflowPage([_row(r) for r in rows[:limit]], older, newer)
