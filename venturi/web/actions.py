"""The dashboard's actions (POST): retry, cancel, delete and run-now on one job or on every
job of a filter, and pausing and resuming kinds. Each is journaled with the operator
(``Dashboard.operator``), through the same ``venturi.admin`` functions as the command
line; a deletion, whose journal goes with the job, is logged instead."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.status import STATUSES
from venturi.web.kit import BULK_ACTIONS, BadInput, Dashboard, action, job_id_param, render

Act = Callable[..., Awaitable[list[admin.Change]]]
ACTIONS: dict[str, Act] = {
    "retry": admin.retry_jobs,
    "cancel": admin.cancel_jobs,
    "delete": admin.delete_jobs,
    "run-now": admin.run_now_jobs,
}


def _field(form: Any, name: str, max_len: int = 1000) -> str | None:
    value = form.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > max_len:
        raise BadInput(f"{name} must be text of at most {max_len} characters")
    return value


@action
async def job_action(request: Request, d: Dashboard, form: Any) -> Response:
    job_id = job_id_param(request)
    name = request.path_params["action"]
    if name not in ACTIONS:
        raise BadInput(f"unknown action {name[:40]!r}")
    who = d.operator(request)
    async with d.db.writing() as conn:
        changes = await ACTIONS[name](conn, [job_id], operator=who, schema=d.db.schema)
    return render(
        request,
        "outcome.html",
        title=f"{BULK_ACTIONS[name]} job {job_id}",
        changes=changes,
        job_id=job_id,
        filters=None,
    )


@action
async def bulk_action(request: Request, d: Dashboard, form: Any) -> Response:
    name = _field(form, "action") or ""
    if name not in ACTIONS:
        raise BadInput(f"action must be one of {', '.join(ACTIONS)}, got {name[:40]!r}")
    status = _field(form, "status")
    if status is not None and status not in STATUSES:
        raise BadInput(f"status must be one of {', '.join(STATUSES)}")
    kind, key = _field(form, "kind"), _field(form, "key")
    try:
        up_to = int(_field(form, "up_to") or "")
    except ValueError:
        raise BadInput("up_to must be the newest job id of the confirmation") from None
    who = d.operator(request)
    fn = ACTIONS[name]
    async with d.db.writing() as conn:

        async def act(ids: list[int]) -> list[admin.Change]:
            return await fn(conn, ids, operator=who, schema=d.db.schema)

        changes = await admin.act_on_matching(
            conn, act, status=status, kind=kind, key=key, up_to=up_to, schema=d.db.schema
        )
    return render(
        request,
        "outcome.html",
        title=f"{BULK_ACTIONS[name]}: every matching job",
        changes=changes,
        job_id=None,
        filters={"status": status, "kind": kind, "key": key},
    )


def _kind(form: Any) -> str:
    kind = _field(form, "kind", 200)
    if kind is None:
        raise BadInput("kind is required")
    return kind


@action
async def kind_pause(request: Request, d: Dashboard, form: Any) -> Response:
    kind = _kind(form)
    reason = _field(form, "reason", 500) or ""
    async with d.db.writing() as conn:
        await admin.pause_kinds(
            conn, [kind], reason=reason, operator=d.operator(request), schema=d.db.schema
        )
    change = admin.Change(0, True, f"paused {kind}", kind)
    return render(
        request,
        "outcome.html",
        title=f"Pause {kind}",
        changes=[change],
        job_id=None,
        filters=None,
    )


@action
async def kind_resume(request: Request, d: Dashboard, form: Any) -> Response:
    kind = _kind(form)
    async with d.db.writing() as conn:
        resumed = await admin.resume_kinds(conn, [kind], schema=d.db.schema)
    done = kind in resumed
    change = admin.Change(0, done, f"resumed {kind}" if done else f"{kind} was not paused", kind)
    return render(
        request,
        "outcome.html",
        title=f"Resume {kind}",
        changes=[change],
        job_id=None,
        filters=None,
    )
