"""The dashboard's workflows (SPEC 12): a job page's workflow part (its graph, its steps
and signals in the timeline, what it waits for now) and the workflows list, /workflows
with its JSON twin /api/workflows. Every read is bounded (``venturi.admin``'s
``workflow_view``, ``workflow_graph``, ``list_workflows``): a workflow of a million
children draws ``graph.MAX_NODES`` jobs and says how many it left out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.status import STATUSES
from venturi.web import graph
from venturi.web.kit import (
    MAX_LIMIT,
    Dashboard,
    api,
    int_param,
    json_response,
    page,
    render,
    status_filter,
    text_param,
    url,
)

PAGE_SIZE = 50


@dataclass(frozen=True)
class Moment:
    """One line of a job's timeline: a journal event, a recorded step or a signal."""

    at: datetime
    what: str  # "journal", "step" or "signal"
    item: Any


def timeline(journal: list[Any], view: admin.WorkflowView | None) -> list[Moment]:
    """The journal, with the recorded steps and the signals received, in time order (a
    journal event before a step of the same instant: the claim comes first)."""
    moments = [Moment(e.at, "journal", e) for e in journal]
    if view is not None:
        moments += [Moment(s.recorded_at, "step", s) for s in view.steps]
        moments += [Moment(g.sent_at, "signal", g) for g in view.signals]
    order = {"journal": 0, "step": 1, "signal": 2}
    return sorted(moments, key=lambda m: (m.at, order[m.what]))


def draw(request: Request, found: admin.WorkflowGraph, current: int) -> graph.Graph | None:
    """The picture of ``found`` with ``current`` marked; None if it cannot be drawn (an
    edge that makes a cycle, which the statements should never give: the page lists the
    counts instead of failing)."""
    nodes = [
        graph.DrawnJob(j.id, j.kind, j.status, url(request, "job", job_id=j.id)) for j in found.jobs
    ]
    try:
        return graph.layout(nodes, found.edges, current=current)
    except graph.GraphError:
        return None


async def job_workflow(request: Request, conn: Any, job_id: int, schema: str) -> dict[str, Any]:
    """The job page's workflow part: ``view`` (None for a plain job), ``graph``, and
    ``workflow_graph`` (the jobs it holds: how many were left out)."""
    view = await admin.workflow_view(conn, job_id, schema=schema)
    if view is None or not view.in_workflow:
        return {"view": None, "graph": None, "workflow_graph": None}
    found = await admin.workflow_graph(conn, job_id, drawn=graph.MAX_NODES, schema=schema)
    return {"view": view, "graph": draw(request, found, job_id), "workflow_graph": found}


def _list_filters(request: Request) -> dict[str, Any]:
    return {
        "status": status_filter(text_param(request, "status")),
        "kind": text_param(request, "kind", 200),
        "q": text_param(request, "q", 200),
    }


@page
async def workflows(request: Request, d: Dashboard) -> Response:
    """The workflow roots, newest first, by status and kind, paged both ways."""
    f = _list_filters(request)
    before = int_param(request, "before")
    after = int_param(request, "after")
    async with d.db.reading() as conn:
        found = await admin.list_workflows(
            conn,
            status=f["status"],
            kind=f["kind"],
            search=f["q"],
            before=before,
            after=after,
            limit=PAGE_SIZE,
            schema=d.db.schema,
        )
        kinds = await admin.known_kinds(conn, schema=d.db.schema)
    return render(
        request,
        "workflows.html",
        page=found,
        rows=found.rows,
        filters=f,
        kinds=kinds,
        statuses=STATUSES,
        live=True,
    )


@api
async def api_workflows(request: Request, d: Dashboard) -> Response:
    """/workflows as JSON: ?status=&kind=&q=&before=&after=&limit= (default 50)."""
    f = _list_filters(request)
    limit = int_param(request, "limit", high=MAX_LIMIT) or PAGE_SIZE
    before = int_param(request, "before")
    after = int_param(request, "after")
    async with d.db.reading() as conn:
        found = await admin.list_workflows(
            conn,
            status=f["status"],
            kind=f["kind"],
            search=f["q"],
            before=before,
            after=after,
            limit=limit,
            schema=d.db.schema,
        )
    return json_response(found)
