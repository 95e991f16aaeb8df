"""The dashboard's HTML pages (GET): overview, jobs, a job, kinds, workers, schedules, and
the bulk-action confirmation."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin, bulk
from venturi.web import charts, queries
from venturi.web.asgi import BadInput, Dashboard, error_page, page, render

PAGE_SIZE = 50
HELD_SHOWN = 50
MAX_LIMIT = 500
BULK_ACTIONS = {"retry": "Retry", "cancel": "Cancel", "delete": "Delete", "run-now": "Run now"}


def text_param(request: Request, name: str, max_len: int = 1000) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if len(value) > max_len:
        raise BadInput(f"{name} is longer than {max_len} characters")
    return value


def int_param(request: Request, name: str, *, low: int = 1, high: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise BadInput(f"{name} must be an integer, got {value[:40]!r}") from None
    if n < low or (high is not None and n > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise BadInput(f"{name} must be {bound}, got {n}")
    return n


def filters(request: Request) -> dict[str, str | None]:
    """The job filter of the query string: status, kind, key."""
    status = text_param(request, "status")
    if status is not None and status not in admin.STATUSES:
        raise BadInput(f"status must be one of {', '.join(admin.STATUSES)}, got {status[:40]!r}")
    return {
        "status": status,
        "kind": text_param(request, "kind"),
        "key": text_param(request, "key"),
    }


def _charts(minutes: list[queries.Minute]) -> list[charts.Chart]:
    return [
        charts.bar_chart(
            "Completed per minute", "done", [(m.minute, m.completed) for m in minutes], "completed"
        ),
        charts.bar_chart(
            "Failures per minute", "failed", [(m.minute, m.failures) for m in minutes], "failed"
        ),
    ]


async def _overview_context(d: Dashboard) -> dict[str, Any]:
    async with d.db.reading() as conn:
        ov = await queries.overview(conn, d.db.schema)
        minutes = await queries.activity(conn, d.db.schema)
    return {"overview": ov, "charts": _charts(minutes)}


@page
async def overview(request: Request, d: Dashboard) -> Response:
    return render(request, "overview.html", **await _overview_context(d))


@page
async def overview_live(request: Request, d: Dashboard) -> Response:
    """The overview's live part, polled by the page every few seconds."""
    return render(request, "_overview_live.html", **await _overview_context(d))


@page
async def jobs(request: Request, d: Dashboard) -> Response:
    f = filters(request)
    before = int_param(request, "before")
    async with d.db.reading() as conn:
        rows = await admin.list_jobs(
            conn,
            status=f["status"],
            kind=f["kind"],
            key=f["key"],
            before=before,
            limit=PAGE_SIZE + 1,
            schema=d.db.schema,
        )
    older = rows[PAGE_SIZE - 1].id if len(rows) > PAGE_SIZE else None
    return render(
        request,
        "jobs.html",
        rows=rows[:PAGE_SIZE],
        filters=f,
        before=before,
        older=older,
        statuses=admin.STATUSES,
        bulk_actions=BULK_ACTIONS,
    )


@page
async def job(request: Request, d: Dashboard) -> Response:
    job_id = _job_id(request)
    async with d.db.reading() as conn:
        detail = await admin.show_job(conn, job_id, schema=d.db.schema)
    if detail is None:
        return error_page(request, 404, f"job {job_id} does not exist")
    return render(request, "job.html", detail=detail, job=detail.job)


def _job_id(request: Request) -> int:
    raw = request.path_params["job_id"]
    if not raw.isdigit() or not 0 < int(raw) < 2**63:
        raise BadInput(f"a job id is a positive integer, got {raw[:40]!r}")
    return int(raw)


@page
async def kinds(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        ov = await queries.overview(conn, d.db.schema)
    return render(request, "kinds.html", overview=ov)


@page
async def workers(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        workers = await admin.list_workers(conn, schema=d.db.schema)
        claimed = await queries.claimed_jobs(conn, d.db.schema)
    # Each worker run's claims (by its token and name: a worker from before the registry
    # has only its name), the first HELD_SHOWN of them linked (a page, not a dump).
    held: dict[tuple[str | None, str], list[queries.ClaimedJob]] = {}
    for c in claimed:
        token = None if c.claim_token is None else str(c.claim_token)
        shown = held.setdefault((token, c.claimed_by or "?"), [])
        if len(shown) < HELD_SHOWN:
            shown.append(c)
    return render(
        request,
        "workers.html",
        workers=workers,
        liveness=admin.DEFAULT_LIVENESS,
        held=held,
        truncated=len(claimed) >= queries.CLAIMED_SHOWN,
    )


@page
async def schedules(request: Request, d: Dashboard) -> Response:
    async with d.db.reading() as conn:
        found, db_now, note = await queries.schedules(conn, d.db.schema)
    return render(request, "schedules.html", schedules=found, db_now=db_now, note=note)


@page
async def bulk_confirm(request: Request, d: Dashboard) -> Response:
    """How many jobs a bulk action would touch, and the form that does it."""
    act = request.query_params.get("action", "")
    if act not in BULK_ACTIONS:
        raise BadInput(f"action must be one of {', '.join(BULK_ACTIONS)}, got {act[:40]!r}")
    f = filters(request)
    async with d.db.reading() as conn:
        matching = await bulk.count_matching(
            conn, status=f["status"], kind=f["kind"], key=f["key"], schema=d.db.schema
        )
    return render(
        request,
        "bulk_confirm.html",
        action=act,
        action_label=BULK_ACTIONS[act],
        filters=f,
        matching=matching,
    )


def login_page(request: Request, d: Dashboard, status: int = 200, wrong: bool = False) -> Response:
    return render(
        request, "login.html", status, next=request.query_params.get("next", ""), wrong=wrong
    )
