"""The JSON API under /api/: what the command line's ``--json`` prints, from the same
``venturi.admin`` functions (``jobs list``, ``jobs show``, ``stats``; /api/workers is
``venturi top``'s workers)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.web.kit import (
    MAX_LIMIT,
    Dashboard,
    api,
    filter_params,
    group_param,
    int_param,
    job_id_param,
    json_response,
)


@api
async def jobs(request: Request, d: Dashboard) -> Response:
    """``venturi jobs list --json``: ?status=&kind=&limit= (default 50), and key=, before=,
    group=."""
    f = filter_params(request)
    group = group_param(request)
    limit = int_param(request, "limit", high=MAX_LIMIT) or 50
    before = int_param(request, "before")
    async with d.db.reading() as conn:
        rows = await admin.list_jobs(
            conn,
            status=f["status"],
            kind=f["kind"],
            key=f["key"],
            before=before,
            limit=limit,
            schema=d.db.schema,
            group=group,
        )
    return json_response(rows)


@api
async def job(request: Request, d: Dashboard) -> Response:
    """``venturi jobs show ID --json``."""
    job_id = job_id_param(request)
    async with d.db.reading() as conn:
        detail = await admin.show_job(conn, job_id, schema=d.db.schema)
    if detail is None:
        return json_response({"error": f"job {job_id} does not exist"}, 404)
    return json_response(detail)


@api
async def stats(request: Request, d: Dashboard) -> Response:
    """``venturi stats --json``: every finished job counted (in parallel, if it may)."""
    async with d.db.reading(serial=False) as conn:
        return json_response(await admin.stats(conn, schema=d.db.schema))


@api
async def workers(request: Request, d: Dashboard) -> Response:
    """``venturi workers --json``: the registered workers and the claims each holds."""
    async with d.db.reading() as conn:
        return json_response(await admin.list_workers(conn, schema=d.db.schema))
