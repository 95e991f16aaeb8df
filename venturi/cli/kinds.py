"""``venturi kinds``: list the kinds, pause and resume them across every worker."""

from __future__ import annotations

from typing import Annotated

import typer

from venturi import sql
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    JsonOption,
    SchemaOption,
    admin_run,
    echo_json,
    make_console,
    need_dsn,
    say,
)

kinds_app = typer.Typer(help="Pause and resume kinds across every worker.", no_args_is_help=True)
app.add_typer(kinds_app, name="kinds")
KindsArgument = Annotated[list[str], typer.Argument(help="Task kinds.", show_default=False)]


@kinds_app.command("pause")
def kinds_pause(
    kinds: KindsArgument,
    reason: Annotated[str, typer.Option(help="Why, shown by `venturi kinds list`.")] = "",
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Leave KINDS out of every worker's claim until resumed; running jobs finish."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    done = admin_run(
        target, schema, lambda c: admin.pause_kinds(c, kinds, reason=reason, schema=schema)
    )
    for p in done.kinds:
        say(f"paused {p.kind}" + (f" ({p.reason})" if p.reason else ""))
    # Pausing a kind before it is deployed is legitimate, so it is paused all the same;
    # but a kind no job, schedule or running worker has is most often a typo, which
    # would pause nothing.
    for kind in done.unknown:
        say(
            f"venturi: warning: no job, schedule or running worker has kind {kind!r} (yet);"
            " paused anyway, check the spelling",
            err=True,
        )


@kinds_app.command("resume")
def kinds_resume(
    kinds: KindsArgument,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Let workers claim KINDS again (and wake the idle ones)."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    resumed = admin_run(target, schema, lambda c: admin.resume_kinds(c, kinds, schema=schema))
    for kind in kinds:
        say(f"resumed {kind}" if kind in resumed else f"{kind} was not paused")


@kinds_app.command("list")
def kinds_list(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Every kind the database knows (of a job, a schedule, a registered worker, or a
    pause), active or paused; for a paused one, when, by whom, why."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli.render import kinds_table

    target = need_dsn(dsn)
    kinds = admin_run(target, schema, lambda c: admin.list_kinds(c, schema=schema))
    if as_json:
        echo_json(kinds)
        return
    if not kinds:
        say("no kinds: no job, schedule, worker or pause names one yet")
        return
    make_console().print(kinds_table(kinds))
