"""``venturi kinds``: pause and resume kinds across every worker."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from venturi import db, sql
from venturi.cli.app import (
    DsnOption,
    JsonOption,
    SchemaOption,
    _admin_run,
    _echo_json,
    _need_dsn,
    app,
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
    from venturi import admin

    target = _need_dsn(dsn)
    who = admin.operator_identity()

    async def work(conn: Any) -> tuple[list[Any], set[str]]:
        known = await db.kinds.kind_list_known(conn, schema=schema, kinds=kinds)
        return await db.kinds.kind_pause(
            conn, schema=schema, kinds=kinds, paused_by=who, reason=reason
        ), known

    rows, known = _admin_run(target, schema, work)
    for r in rows:
        typer.echo(f"paused {r['kind']}" + (f" ({r['reason']})" if r["reason"] else ""))
    # Pausing a kind before it is deployed is legitimate, so it is paused all the same;
    # but a kind no job or schedule has is most often a typo, which would pause nothing.
    for kind in dict.fromkeys(kinds):
        if kind not in known:
            typer.echo(
                f"venturi: warning: no job or schedule has kind {kind!r} (yet); paused anyway,"
                " check the spelling",
                err=True,
            )


@kinds_app.command("resume")
def kinds_resume(
    kinds: KindsArgument,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Let workers claim KINDS again (and wake the idle ones)."""
    target = _need_dsn(dsn)
    resumed = _admin_run(
        target, schema, lambda c: db.kinds.kind_resume(c, schema=schema, kinds=kinds)
    )
    for kind in kinds:
        typer.echo(f"resumed {kind}" if kind in resumed else f"{kind} was not paused")


@kinds_app.command("list")
def kinds_list(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """The paused kinds: when, by whom, why."""
    target = _need_dsn(dsn)
    rows = _admin_run(target, schema, lambda c: db.kinds.kind_paused_list(c, schema=schema))
    data = [
        {
            "kind": r["kind"],
            "paused_at": r["paused_at"],
            "paused_by": r["paused_by"],
            "reason": r["reason"],
        }
        for r in rows
    ]
    if as_json:
        _echo_json(data)
        return
    if not data:
        typer.echo("no kind is paused")
    for d in data:
        typer.echo(
            f"{d['kind']}\tpaused {d['paused_at']:%Y-%m-%d %H:%M:%S} by {d['paused_by']}"
            + (f": {d['reason']}" if d["reason"] else "")
        )
