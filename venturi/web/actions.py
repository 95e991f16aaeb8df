"""The dashboard's actions (POST): retry, cancel, delete and run-now on one job, on the
selected rows of the list, or on every job of a filter (on one job, retry may take its
dead or cancelled children along and run-now may time out a signal's wait, each when
its form says so); sending a signal to one job; pausing and resuming kinds and one group
of a kind (``venturi.set_group``, journaled nowhere: a group's setting is not a job's
event); recovering a gone worker's claims. Each is journaled with the operator
(``Dashboard.operator``), through the same ``venturi.admin`` functions as the command
line (a deletion, whose journal goes with the job, is logged instead), and answers 303
back to the page the form came from, which shows the outcome once."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from venturi import admin
from venturi.codecs import MAX_NESTING, too_deep
from venturi.errors import ConfigError
from venturi.formatting import shown_name
from venturi.groups import check_group, set_group
from venturi.web.flash import Flash, of_changes
from venturi.web.kit import (
    BadInput,
    Dashboard,
    action,
    action_named,
    ascii_int,
    job_id_param,
    redirect_back,
    status_filter,
)

# The most rows one selection acts on (a page holds 50).
SELECTION_MAX = 500


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
    chosen = action_named(name)
    options: dict[str, bool] = {}
    if name == "retry" and _field(form, "with_children") == "1":
        options["with_children"] = True
    if name == "run-now" and _field(form, "timeout_now") == "1":
        options["timeout_now"] = True
    async with d.db.writing() as conn:
        changes = await chosen.act(
            conn, [job_id], operator=d.operator(request), schema=d.db.schema, **options
        )
    title = f"{chosen.label} job {job_id}"
    if options.get("timeout_now"):
        title = f"Time out the signal of job {job_id}"
    return redirect_back(request, form, of_changes(title, changes))


@action
async def job_signal(request: Request, d: Dashboard, form: Any) -> Response:
    """``venturi jobs signal``: the form's signal name and its JSON payload (empty:
    null), journaled with the operator."""
    job_id = job_id_param(request)
    name = _field(form, "name", 200)
    if name is None:
        raise BadInput("name is required: the signal's name")
    text = _field(form, "payload", 100_000)
    # Checked on the text before decoding, as `venturi jobs signal` does: msgspec's
    # decoder recurses (about 1,000 levels raised RecursionError, a bare 500), and no
    # value is stored past MAX_NESTING.
    if text is not None and too_deep(text):
        raise BadInput(f"the payload is nested deeper than {MAX_NESTING} arrays or objects")
    try:
        payload = None if text is None else msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise BadInput(f"the payload is not JSON: {exc}") from None
    async with d.db.writing() as conn:
        change = await admin.send_signal(
            conn, job_id, name, payload, operator=d.operator(request), schema=d.db.schema
        )
    return redirect_back(request, form, of_changes(f"Signal job {job_id}", [change]))


def _ids(form: Any) -> list[int]:
    raw = form.getlist("ids")
    if len(raw) > SELECTION_MAX:
        raise BadInput(f"at most {SELECTION_MAX} jobs at once, got {len(raw)}")
    ids = []
    for value in raw:
        n = ascii_int(value)
        if n is None or not 0 < n < 2**63:
            raise BadInput(f"a job id is a positive integer, got {str(value)[:40]!r}")
        ids.append(n)
    return ids


@action
async def selection_action(request: Request, d: Dashboard, form: Any) -> Response:
    """The list's ticked rows: one action on exactly those jobs."""
    name = _field(form, "action") or ""
    chosen = action_named(name)
    if not form.getlist("ids"):
        return redirect_back(
            request, form, Flash(chosen.label, 0, 1, ["no job selected: tick rows first"], 0)
        )
    ids = _ids(form)
    async with d.db.writing() as conn:
        changes = await chosen.act(conn, ids, operator=d.operator(request), schema=d.db.schema)
    title = f"{chosen.label}: {len(set(ids))} selected job(s)"
    return redirect_back(request, form, of_changes(title, changes))


@action
async def bulk_action(request: Request, d: Dashboard, form: Any) -> Response:
    name = _field(form, "action") or ""
    chosen = action_named(name)
    status = status_filter(_field(form, "status"))
    kind, key, search = _field(form, "kind"), _field(form, "key"), _field(form, "q", 200)
    group = _field(form, "group")
    if group is not None:
        check_group(group, new=False)
    up_to = ascii_int(_field(form, "up_to"))
    if up_to is None:
        raise BadInput("up_to must be the newest job id of the confirmation")
    who = d.operator(request)
    async with d.db.writing() as conn:

        async def act(ids: list[int]) -> list[admin.Change]:
            return await chosen.act(conn, ids, operator=who, schema=d.db.schema)

        changes = await admin.act_on_matching(
            conn,
            act,
            status=status,
            kind=kind,
            key=key,
            search=search,
            up_to=up_to,
            schema=d.db.schema,
            group=group,
        )
    title = f"{chosen.label}: every matching job"
    return redirect_back(request, form, of_changes(title, changes))


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
    return redirect_back(request, form, Flash(f"Pause {kind}", 1, 0, [f"paused {kind}"], 0))


@action
async def kind_resume(request: Request, d: Dashboard, form: Any) -> Response:
    kind = _kind(form)
    async with d.db.writing() as conn:
        resumed = await admin.resume_kinds(conn, [kind], schema=d.db.schema)
    done = kind in resumed
    message = f"resumed {kind}" if done else f"{kind} was not paused"
    return redirect_back(
        request, form, Flash(f"Resume {kind}", int(done), int(not done), [message], 0)
    )


def _group(form: Any) -> tuple[str, str]:
    """The kind and the group a group's form names, each checked before anything is
    written (``check_group``: empty, over 200 characters, a control character: 400)."""
    return _kind(form), check_group(form.get("group"), new=False)


@action
async def group_pause(request: Request, d: Dashboard, form: Any) -> Response:
    """``venturi groups set KIND GROUP --pause``: the group's jobs stay pending."""
    return await _group_paused(request, d, form, paused=True)


@action
async def group_resume(request: Request, d: Dashboard, form: Any) -> Response:
    """``venturi groups set KIND GROUP --resume``: its jobs are claimed again."""
    return await _group_paused(request, d, form, paused=False)


async def _group_paused(request: Request, d: Dashboard, form: Any, *, paused: bool) -> Response:
    kind, group = _group(form)
    async with d.db.writing() as conn:
        await set_group(conn, kind, group, paused=paused, schema=d.db.schema)
        unknown = await admin.unknown_kinds(conn, [kind], schema=d.db.schema)
    name = shown_name(group)
    if paused:
        title = f"Pause group {name}"
        messages = [f"paused group {name} of {kind}: its jobs stay pending until it is resumed"]
    else:
        title, messages = f"Resume group {name}", [f"resumed group {name} of {kind}"]
    # As `venturi groups set` warns: set all the same (a group may be set up before its
    # kind is deployed), but a kind nothing has is most often misspelt.
    messages += [
        f"warning: no job, schedule or running worker has kind {k!r} (yet); set anyway, "
        "check the spelling"
        for k in unknown
    ]
    return redirect_back(request, form, Flash(title, 1, 0, messages, 0))


@action
async def worker_recover(request: Request, d: Dashboard, form: Any) -> Response:
    """``venturi recover --worker``: a gone worker's claims back now; a live worker is
    refused (400, its reason) unless the form says force."""
    worker = _field(form, "worker", 200)
    if worker is None:
        raise BadInput("worker is required: the id of the worker to recover")
    force = _field(form, "force") == "1"
    async with d.db.writing() as conn:
        try:
            done = await admin.recover_worker(
                conn, worker, force=force, operator=d.operator(request), schema=d.db.schema
            )
        except ConfigError as exc:  # a live worker without force, or no such worker
            return redirect_back(request, form, Flash("Recover", 0, 1, [str(exc)[:240]], 0))
    w = done.worker
    changes = done.jobs or [admin.Change(0, True, f"worker {w.name} held no claim any more")]
    return redirect_back(request, form, of_changes(f"Recover worker {w.name} ({w.state})", changes))
