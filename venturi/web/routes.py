"""The dashboard's routes, and its login and logout."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from venturi.web import actions, api, groups, pages, workflows
from venturi.web.auth import CSRF_FIELD, SESSION_COOKIE, SESSION_MAX_AGE
from venturi.web.kit import dashboard, error_page, root_path, safe_path, set_cookie, url


async def login(request: Request) -> Response:
    d = dashboard(request)
    if d.guard.token is None:
        return RedirectResponse(url(request, "overview"), 303)
    if request.method == "GET":
        return pages.login_page(request, d)
    form = await request.form()
    if not d.guard.csrf_valid(form.get(CSRF_FIELD), request.cookies):
        return error_page(request, 403, "the form's CSRF token is missing or wrong: reload")
    client = request.client.host if request.client else "?"
    wait = d.guard.logins.wait(client)
    if wait > 0:
        refused = error_page(
            request, 429, f"too many failed logins: try again in {math.ceil(wait)} s"
        )
        refused.headers["retry-after"] = str(math.ceil(wait))
        return refused
    given = form.get("token")
    if not isinstance(given, str) or not d.guard.token_matches(given.strip()):
        d.guard.logins.failed(client)
        return pages.login_page(request, d, 401, wrong=True)
    d.guard.logins.succeeded(client)
    response = RedirectResponse(safe_path(request, form.get("next")), 303)
    session = d.guard.sessions.new()
    set_cookie(response, request, SESSION_COOKIE, session, max_age=SESSION_MAX_AGE)
    return response


async def logout(request: Request) -> Response:
    d = dashboard(request)
    form = await request.form()
    if not d.guard.csrf_valid(form.get(CSRF_FIELD), request.cookies):
        return error_page(request, 403, "the form's CSRF token is missing or wrong: reload")
    d.guard.sessions.end(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse(url(request, "login"), 303)
    response.delete_cookie(SESSION_COOKIE, path=root_path(request) + "/")
    return response


ROUTES = [
    Route("/", pages.overview, name="overview"),
    Route("/partials/overview", pages.overview_live, name="overview_live"),
    Route("/jobs", pages.jobs, name="jobs"),
    Route("/jobs/bulk", pages.bulk_confirm, name="bulk_confirm", methods=["GET"]),
    Route("/jobs/bulk", actions.bulk_action, name="bulk_action", methods=["POST"]),
    Route("/jobs/selected", actions.selection_action, name="selection_action", methods=["POST"]),
    Route("/jobs/{job_id}", pages.job, name="job"),
    Route("/jobs/{job_id}/signal", actions.job_signal, name="job_signal", methods=["POST"]),
    Route("/jobs/{job_id}/{action}", actions.job_action, name="job_action", methods=["POST"]),
    Route("/kinds", pages.kinds, name="kinds"),
    Route("/kind", pages.kind, name="kind"),
    Route("/kinds/pause", actions.kind_pause, name="kind_pause", methods=["POST"]),
    Route("/kinds/resume", actions.kind_resume, name="kind_resume", methods=["POST"]),
    Route("/kinds/groups/pause", actions.group_pause, name="group_pause", methods=["POST"]),
    Route("/kinds/groups/resume", actions.group_resume, name="group_resume", methods=["POST"]),
    Route("/workers", pages.workers, name="workers"),
    Route("/workers/recover", actions.worker_recover, name="worker_recover", methods=["POST"]),
    Route("/schedules", pages.schedules, name="schedules"),
    Route("/workflows", workflows.workflows, name="workflows"),
    Route("/login", login, name="login", methods=["GET", "POST"]),
    Route("/logout", logout, name="logout", methods=["POST"]),
    Route("/api/jobs", api.jobs, name="api_jobs"),
    Route("/api/jobs/{job_id}", api.job, name="api_job"),
    Route("/api/stats", api.stats, name="api_stats"),
    Route("/api/workers", api.workers, name="api_workers"),
    Route("/api/workflows", workflows.api_workflows, name="api_workflows"),
    Route("/api/groups", groups.api_groups, name="api_groups"),
]
