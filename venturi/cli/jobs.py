"""``venturi jobs``: list, show, retry, cancel, delete, run now, signal and re-prioritise
jobs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from venturi import sql
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    JsonOption,
    SchemaOption,
    admin_run,
    checked,
    echo_json,
    fail,
    make_console,
    need_dsn,
    say,
)
from venturi.groups import check_group
from venturi.status import JobStatus

jobs_app = typer.Typer(help="Inspect and repair jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")

IdsArgument = Annotated[list[int], typer.Argument(help="Job ids.", show_default=False)]


@jobs_app.command("list")
def jobs_list(
    status: Annotated[
        str | None,
        typer.Option(help="pending, claimed, waiting, completed, dead or cancelled."),
    ] = None,
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    limit: Annotated[int, typer.Option(help="Most jobs to show, newest first.")] = 50,
    group: Annotated[str | None, typer.Option(help="Only jobs of this group.")] = None,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """List jobs, newest first."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    if group is not None:
        checked(lambda g: check_group(g, new=False), group)
    target = need_dsn(dsn)
    rows = admin_run(
        target,
        schema,
        lambda c: admin.list_jobs(
            c, status=status, kind=kind, limit=limit, schema=schema, group=group
        ),
    )
    if as_json:
        echo_json(rows)
        return
    console = make_console()
    if not rows:
        console.print("no jobs")
        return
    console.print(render.jobs_table(rows, datetime.now(UTC)))


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job id.")],
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Show one job: its row (its group too), decoded carry and result, journal and
    tracebacks, and why a pending job waits."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    target = need_dsn(dsn)
    detail = admin_run(target, schema, lambda c: admin.show_job(c, job_id, schema=schema))
    if detail is None:
        raise fail(f"job {job_id} does not exist")
    if as_json:
        echo_json(detail)
        return
    make_console().print(render.job_detail(detail, datetime.now(UTC)))


def _report(changes: list[Any], as_json: bool, summary: str) -> None:
    """Each change on stdout, each refusal as a one-line error on stderr, then a summary;
    exit 2 when anything was refused."""
    if as_json:
        echo_json(changes)
    else:
        for c in changes:
            if c.done:
                say(c.message)
            else:
                say(f"venturi: {c.message}", err=True)
        say(summary)
    if not all(c.done for c in changes):
        raise typer.Exit(2)


@jobs_app.command("retry")
def jobs_retry(
    ids: IdsArgument,
    with_children: Annotated[
        bool,
        typer.Option(
            "--with-children",
            help="Also retry the workflow children (and theirs) that ended dead or cancelled.",
        ),
    ] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Send dead or cancelled jobs back to pending, visible now, with a fresh failure
    budget (journaled as retried: manual retry); a workflow keeps its recorded steps.
    A parent's dead or cancelled children stay so unless --with-children, and its
    gather then raises ChildFailed again. Exit 2 if any job was refused."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    changes = admin_run(
        target,
        schema,
        lambda c: admin.retry_jobs(c, ids, with_children=with_children, schema=schema),
    )
    done = sum(c.done for c in changes)
    _report(changes, as_json, f"retried {done} of {len(changes)} job(s)")


@jobs_app.command("cancel")
def jobs_cancel(
    ids: IdsArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Cancel pending or waiting jobs, and a workflow's unfinished children and
    dependents with them; for a claimed job, ask its worker to stop it (the worker
    settles it cancelled). Exit 2 if any job was refused."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    changes = admin_run(target, schema, lambda c: admin.cancel_jobs(c, ids, schema=schema))
    # The cascade's share (a workflow's children and dependents) counted too.
    gone = sum(len(getattr(c, "cascade_cancelled", ())) for c in changes)
    stopping = sum(len(getattr(c, "cascade_asked", ())) for c in changes)
    cancelled = gone + sum(c.now == JobStatus.CANCELLED for c in changes)
    asked = stopping + sum(c.done and c.now == JobStatus.CLAIMED for c in changes)
    refused = sum(not c.done for c in changes)
    by_cascade = f" ({gone} of them by the cascade to children and dependents)" if gone else ""
    asked_by = f" ({stopping} by the cascade)" if stopping else ""
    _report(
        changes,
        as_json,
        f"cancelled {cancelled}{by_cascade}, asked {asked} running to stop{asked_by}, "
        f"refused {refused}",
    )


@jobs_app.command("delete")
def jobs_delete(
    ids: IdsArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Delete jobs and their journal; a claimed job is refused (cancel it first). Each
    deletion is logged with the operator. Exit 2 if any job was refused."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    changes = admin_run(target, schema, lambda c: admin.delete_jobs(c, ids, schema=schema))
    done = sum(c.done for c in changes)
    _report(changes, as_json, f"deleted {done} of {len(changes)} job(s)")


@jobs_app.command("run-now")
def jobs_run_now(
    ids: IdsArgument,
    timeout_now: Annotated[
        bool,
        typer.Option(
            "--timeout-now",
            help="Also fire the timeout of the signal a workflow waits for: its wait "
            "raises SignalTimeout.",
        ),
    ] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Make pending jobs scheduled for later visible now (journaled released: run now),
    and wake a workflow asleep on a timer now (journaled woken: its sleep returns).
    A workflow waiting for a signal is refused: send the signal (venturi jobs signal),
    or time it out with --timeout-now. Wakes the workers of their kinds. Exit 2 if any
    job was refused."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    changes = admin_run(
        target,
        schema,
        lambda c: admin.run_now_jobs(c, ids, timeout_now=timeout_now, schema=schema),
    )
    done = sum(c.done for c in changes)
    _report(changes, as_json, f"made {done} of {len(changes)} job(s) visible now")


@jobs_app.command("signal")
def jobs_signal(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job id.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The signal's name.")],
    payload: Annotated[
        str | None,
        typer.Option(
            "--json",
            metavar="PAYLOAD",
            help="The payload as JSON (default: null). Here --json is the payload, not the "
            "output's format.",
            show_default=False,
        ),
    ] = None,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Send signal NAME to a workflow job, as venturi.signal does (the first of a name
    wins), journaled with who sent it: a job waiting for it is pending at once; any
    other unfinished job finds it when it waits for it. Exit 2 if refused."""
    import msgspec

    from venturi import (
        admin,  # not at import: see venturi/cli/__init__.py
        validate,
    )
    from venturi.codecs import MAX_NESTING, encode_any, too_deep
    from venturi.errors import ConfigError

    # On the text, before decoding: how deep msgspec's decoder gets before RecursionError
    # differs between Pythons (3.11 stops near 1,000, 3.12 decoded it and the encode
    # refused it with a traceback), and a payload may not be stored past MAX_NESTING.
    deep = f"--json is nested deeper than {MAX_NESTING} arrays or objects"
    if payload is not None and not validate.encodable(payload):
        # A byte that is not UTF-8 reaches argv as a lone surrogate, which neither the
        # nesting check nor the decoder can read (UnicodeEncodeError, a traceback).
        raise fail("--json is not UTF-8 text")
    if payload is not None and too_deep(payload):
        raise fail(deep)
    try:
        value = None if payload is None else msgspec.json.decode(payload)
    except msgspec.DecodeError as exc:
        raise fail(f"--json is not JSON: {exc}") from None
    except RecursionError:
        raise fail(deep) from None
    try:
        # What the send would store, checked before connecting: a NUL (\u0000 in a
        # string or a key) decodes, and PostgreSQL cannot store it; the encoder's
        # ValueError was a traceback.
        encode_any(value, "--json")
    except ValueError as exc:
        raise fail(str(exc)) from None
    target = need_dsn(dsn)
    try:
        change = admin_run(
            target,
            schema,
            lambda c: admin.send_signal(c, job_id, name, value, schema=schema),
        )
    except ConfigError as exc:
        raise fail(str(exc)) from None
    _report([change], False, f"sent {int(change.done)} of 1 signal(s)")


@jobs_app.command("set-priority")
def jobs_set_priority(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job id.")],
    priority: Annotated[str, typer.Argument(metavar="PRIORITY", help="high, normal or low.")],
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Set a pending job's priority (journaled released, with the priority before).
    Exit 2 if the job was refused."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.errors import ConfigError

    try:
        tier = admin.parse_priority(priority)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    target = need_dsn(dsn)
    changes = admin_run(
        target, schema, lambda c: admin.set_priority(c, [job_id], tier, schema=schema)
    )
    done = sum(c.done for c in changes)
    _report(changes, as_json, f"set the priority of {done} of {len(changes)} job(s)")
