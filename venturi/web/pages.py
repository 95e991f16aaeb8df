"""The dashboard's HTML pages (GET): overview, jobs (search, paging, selection), a job,
kinds and a kind's own page (its trends), workers, schedules, and the bulk-action
confirmation."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.status import DEFAULT_LIVENESS, STATUSES, JobStatus
from venturi.web import charts, groups, workflows
from venturi.web.kit import (
    JOB_ACTIONS,
    BadInput,
    Dashboard,
    action_named,
    error_page,
    filter_params,
    group_param,
    int_param,
    job_id_param,
    page,
    render,
    text_param,
)

PAGE_SIZE = 50
HELD_SHOWN = 50


def _charts(minutes: list[admin.Minute]) -> list[charts.Chart]:
    return [
        charts.bar_chart(
            "Completed per minute",
            "done",
            [(m.minute, m.completed) for m in minutes],
            JobStatus.COMPLETED,
        ),
        charts.bar_chart(
            "Failures per minute", "failed", [(m.minute, m.failures) for m in minutes], "failed"
        ),
    ]


async def _overview_context(d: Dashboard) -> dict[str, Any]:
    async with d.db.reading() as conn:
        ov = await admin.overview(conn, schema=d.db.schema)
        minutes = await admin.activity(conn, schema=d.db.schema)
        gone = await admin.gone_with_claims(conn, schema=d.db.schema)
    return {"overview": ov, "charts": _charts(minutes), "gone": gone, "live": True}


@page
async def overview(request: Request, d: Dashboard) -> Response:
    return render(request, "overview.html", **await _overview_context(d))


@page
async def overview_live(request: Request, d: Dashboard) -> Response:
    """The overview's live part, polled by the page every few seconds."""
    return render(request, "_overview_live.html", **await _overview_context(d))


@page
async def jobs(request: Request, d: Dashboard) -> Response:
    f = filter_params(request)
    f["group"] = group_param(request)
    before = int_param(request, "before")
    after = int_param(request, "after")
    wanted = admin.JobFilter(f["status"], f["kind"], f["key"], f["q"], f["group"])
    async with d.db.reading() as conn:
        found = await admin.search_jobs(
            conn, wanted, before=before, after=after, limit=PAGE_SIZE, schema=d.db.schema
        )
        kinds = await admin.known_kinds(conn, schema=d.db.schema)
    return render(
        request,
        "jobs.html",
        page=found,
        rows=found.rows,
        filters=f,
        kinds=kinds,
        statuses=STATUSES,
        bulk_actions={name: a.label for name, a in JOB_ACTIONS.items()},
        live=True,
    )


@page
async def job(request: Request, d: Dashboard) -> Response:
    job_id = job_id_param(request)
    async with d.db.reading() as conn:
        detail = await admin.show_job(conn, job_id, schema=d.db.schema, workflow=False)
        holder = None
        if detail is not None and detail.job.status == "claimed":
            holder = await admin.holder_of(conn, job_id, schema=d.db.schema)
        flow = await workflows.job_workflow(request, conn, job_id, d.db.schema)
    if detail is None:
        return error_page(request, 404, f"job {job_id} does not exist")
    return render(
        request,
        "job.html",
        detail=detail,
        job=detail.job,
        holder=holder,
        timeline=workflows.timeline(detail.journal, flow["view"]),
        live=True,
        **flow,
    )


@page
async def kinds(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        ov = await admin.overview(conn, schema=d.db.schema)
    return render(request, "kinds.html", overview=ov)


# A kind page's periods: their label, and how its charts' times read.
PERIOD_LABELS = {
    "1h": ("last hour", "min", "%H:%M"),
    "24h": ("last 24 h", "20 min", "%H:%M"),
    "7d": ("last 7 days", "2 h", "%a %H:%M"),
}


def _kind_charts(buckets: list[admin.Bucket], period: str) -> list[charts.Chart]:
    unit, fmt = PERIOD_LABELS[period][1], PERIOD_LABELS[period][2]
    series = (
        ("Completed", "done", "completed"),
        ("Failures", "failed", "failures"),
        ("Dead", "dead", "dead"),
    )
    return [
        charts.bar_chart(
            f"{title} per {unit}",
            css,
            [(b.minute, getattr(b, field)) for b in buckets],
            field,
            fmt,
        )
        for title, css, field in series
    ]


@page
async def kind(request: Request, d: Dashboard) -> Response:
    """One kind: its numbers now, its trends over a period, its groups (SPEC 13), its
    jobs, pause and resume."""
    name = text_param(request, "name", 200)
    if name is None:
        raise BadInput("name is required: the kind to show")
    period = request.query_params.get("period") or "1h"
    if period not in admin.PERIODS:
        raise BadInput(f"period must be one of {', '.join(admin.PERIODS)}, got {period[:20]!r}")
    # Every parameter checked before the first read: a bad group_page was answered after
    # the overview and the kind's activity (~300 ms at a million jobs), or with the
    # database's error when it was down.
    group_query = groups.group_filters(request)
    async with d.db.reading() as conn:
        ov = await admin.overview(conn, schema=d.db.schema)
        buckets = await admin.kind_activity(conn, name, period=period, schema=d.db.schema)
        found = await groups.kind_groups(conn, name, d.db.schema, group_query)
    health = next((k for k in ov.kinds if k.kind == name), None)
    paused = next((p for p in ov.paused if p.kind == name), None)
    return render(
        request,
        "kind.html",
        kind=name,
        health=health,
        paused=paused,
        period=period,
        periods=PERIOD_LABELS,
        charts=_kind_charts(buckets, period),
        live=True,
        **found,
    )


@page
async def workers(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        workers = await admin.list_workers(conn, schema=d.db.schema)
        claimed = await admin.claimed_jobs(conn, schema=d.db.schema)
    # Each worker run's claims (by its token and name: a worker from before the registry
    # has only its name), the first HELD_SHOWN of them linked (a page, not a dump).
    held: dict[tuple[str | None, str], list[admin.ClaimedJob]] = {}
    for c in claimed:
        token = None if c.claim_token is None else str(c.claim_token)
        shown = held.setdefault((token, c.claimed_by or "?"), [])
        if len(shown) < HELD_SHOWN:
            shown.append(c)
    return render(
        request,
        "workers.html",
        workers=workers,
        liveness=DEFAULT_LIVENESS,
        held=held,
        truncated=len(claimed) >= admin.CLAIMED_SHOWN,
        live=True,
    )


@page
async def schedules(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        found = await admin.list_schedules(conn, schema=d.db.schema)
    return render(
        request, "schedules.html", schedules=found.schedules, db_now=found.now, note=found.note
    )


@page
async def bulk_confirm(request: Request, d: Dashboard) -> Response:
    """How many jobs a bulk action would touch, and the form that does it."""
    act = request.query_params.get("action", "")
    label = action_named(act).label
    f = filter_params(request)
    f["group"] = group_param(request)
    async with d.db.reading() as conn:
        matching = await admin.count_matching(
            conn,
            status=f["status"],
            kind=f["kind"],
            key=f["key"],
            search=f["q"],
            schema=d.db.schema,
            group=f["group"],
        )
    return render(
        request,
        "bulk_confirm.html",
        action=act,
        action_label=label,
        filters=f,
        matching=matching,
    )


def login_page(request: Request, d: Dashboard, status: int = 200, wrong: bool = False) -> Response:
    return render(
        request,
        "login.html",
        status,
        next=request.query_params.get("next", ""),
        wrong=wrong,
        bare=True,
    )
