"""The dashboard's groups (SPEC 13): the kind page's groups (top by pending or by
claimed, a search over their names, paging) and their JSON twin /api/groups, from
``venturi.admin.list_groups``, the reads of ``venturi groups list``. Pausing and resuming
one group are actions (``venturi.web.actions``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.web.kit import (
    MAX_LIMIT,
    BadInput,
    Dashboard,
    api,
    group_param,
    int_param,
    json_response,
    text_param,
)

# Groups per page of the kind page (and of /api/groups without limit=).
GROUPS_PAGE = 20
# The deepest page asked for (a page beyond the groups is empty, not an error).
PAGES_MAX = 10_000


def group_filters(request: Request) -> dict[str, Any]:
    """The groups' part of a kind page's query: ``group_q`` (a part of a group's name,
    checked as a group is), ``group_order`` (pending or claimed) and ``group_page``."""
    order = request.query_params.get("group_order") or "pending"
    if order not in admin.GROUP_ORDERS:
        orders = ", ".join(admin.GROUP_ORDERS)
        raise BadInput(f"group_order must be one of {orders}, got {order[:40]!r}")
    return {
        "group_q": group_param(request, "group_q"),
        "group_order": order,
        "group_page": int_param(request, "group_page", high=PAGES_MAX) or 1,
    }


async def kind_groups(conn: Any, kind: str, schema: str, f: dict[str, Any]) -> dict[str, Any]:
    """The kind page's groups: ``groups`` (one page), ``groups_more`` (a next page
    exists) and ``group_filters``, the query that chose them (``f``, from
    ``group_filters``, checked by the page before it reads anything)."""
    found = await admin.list_groups(
        conn,
        kind,
        search=f["group_q"],
        limit=GROUPS_PAGE + 1,
        offset=(f["group_page"] - 1) * GROUPS_PAGE,
        order=f["group_order"],
        schema=schema,
    )
    return {
        "groups": found[:GROUPS_PAGE],
        "groups_more": len(found) > GROUPS_PAGE,
        "group_filters": f,
    }


@api
async def api_groups(request: Request, d: Dashboard) -> Response:
    """``venturi groups list KIND --json``: ?kind= (required), and the kind page's
    group_q=, group_order=, group_page=; limit= (default 20, at most 500) per page."""
    kind = text_param(request, "kind", 200)
    if kind is None:
        raise BadInput("kind is required: the kind whose groups to list")
    f = group_filters(request)
    limit = int_param(request, "limit", high=MAX_LIMIT) or GROUPS_PAGE
    async with d.db.reading() as conn:
        found = await admin.list_groups(
            conn,
            kind,
            search=f["group_q"],
            limit=limit,
            offset=(f["group_page"] - 1) * limit,
            order=f["group_order"],
            schema=d.db.schema,
        )
    return json_response(found)
