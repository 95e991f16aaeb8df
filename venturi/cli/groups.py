"""``venturi groups``: a kind's groups (SPEC 13): list them, show one, change one's cap,
weight or pause while workers run."""

from __future__ import annotations

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
from venturi.formatting import shown_name, weight_shown
from venturi.groups import UNCHANGED, check_cap, check_group, check_weight

groups_app = typer.Typer(
    help="Per-group caps, weights and pauses of a kind (docs/groups.md).", no_args_is_help=True
)
app.add_typer(groups_app, name="groups")
KindArgument = Annotated[str, typer.Argument(metavar="KIND", help="The task kind.")]
GroupArgument = Annotated[
    str,
    typer.Argument(
        metavar="GROUP",
        help="The group; one starting with '-' after `--`, as in `KIND -- -name`.",
    ),
]


def _setting(value: str | None, parse: Any, convert: Any) -> Any:
    """An option of ``groups set``: absent keeps the value, ``default`` returns it to the
    task's default, anything else is checked by ``parse`` (one line on a bad value, which
    says `default` where the library says None, and echoes the text as typed: `--weight
    0` said "got 0.0")."""
    if value is None:
        return UNCHANGED
    if value == "default":
        return None
    try:
        number = convert(value)
    except ValueError:
        # Not a number: refused, its text quoted (the check refuses any string).
        return checked(lambda v: parse(v, reset="default"), value)
    checked(lambda v: parse(v, reset="default", typed=value), number)
    return number


@groups_app.command("set")
def groups_set(
    kind: KindArgument,
    group: GroupArgument,
    cap: Annotated[
        str | None,
        typer.Option(help="At most N jobs of the group claimed at once; `default`: the task's."),
    ] = None,
    weight: Annotated[
        str | None,
        typer.Option(help="The group's share among groups with work; `default`: 1."),
    ] = None,
    pause: Annotated[bool, typer.Option("--pause", help="Keep the group's jobs pending.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Claim the group's jobs again.")] = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Change GROUP of KIND while workers run; an option left out keeps its value. A
    lowered cap lets running jobs finish. A GROUP starting with '-' follows `--`, after
    the options: `venturi groups set KIND --pause -- -name`."""
    import venturi
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    checked(lambda g: check_group(g, new=False), group)
    cap_v = _setting(cap, check_cap, int)
    weight_v = _setting(weight, check_weight, float)
    # Two flags, not click's --pause/--resume pair, whose last flag given silently wins.
    if pause and resume:
        raise fail("give --pause or --resume, not both")
    if cap_v is UNCHANGED and weight_v is UNCHANGED and not (pause or resume):
        raise fail("nothing to set: pass --cap, --weight, --pause or --resume")
    target = need_dsn(dsn)

    async def work(c: Any) -> tuple[Any, list[str]]:
        done = await venturi.set_group(
            c,
            kind,
            group,
            cap=cap_v,
            weight=weight_v,
            paused=pause if pause or resume else UNCHANGED,
            schema=schema,
        )
        return done, await admin.unknown_kinds(c, [kind], schema=schema)

    done, unknown = admin_run(target, schema, work)
    cap_text = "default" if done.cap is None else str(done.cap)
    weight_text = "default" if done.weight is None else weight_shown(done.weight)
    state = "paused" if done.paused else "active"
    say(f"{done.kind} {shown_name(done.group)}: cap {cap_text}, weight {weight_text}, {state}")
    # As `venturi kinds pause` warns: set all the same (a group may be set up before its
    # kind is deployed), but a kind nothing has is most often misspelt.
    for name in unknown:
        say(
            f"venturi: warning: no job, schedule or running worker has kind {name!r} (yet);"
            " set anyway, check the spelling",
            err=True,
        )


@groups_app.command("list")
def groups_list(
    kind: KindArgument,
    search: Annotated[
        str | None, typer.Option(help="Only groups whose name holds this, in any case.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Most groups to show, most pending first.")] = 50,
    offset: Annotated[int, typer.Option(help="Groups to skip (the next page).")] = 0,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """The groups of KIND with work (or settings): pending, claimed, cap, weight, paused,
    claimed in the last minute, and why pending jobs wait."""
    from rich.table import Table
    from rich.text import Text

    from venturi.admin.groups import list_groups

    target = need_dsn(dsn)
    rows = admin_run(
        target,
        schema,
        lambda c: list_groups(c, kind, search=search, limit=limit, offset=offset, schema=schema),
    )
    if as_json:
        echo_json(rows)
        return
    console = make_console()
    if not rows:
        holding = f" whose name holds {search!r}" if search else ""
        # A page past the last is not a kind without work (it said so): the list ends
        # before the offset.
        if offset > 0:
            console.print(Text(f"no groups of {kind}{holding} past offset {offset}"))
        else:
            console.print(Text(f"no group of {kind}{holding} has work"))
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("group", "pending", "claimed", "cap", "weight", "state", "last min", "waits"):
        table.add_column(
            name,
            justify="right" if name in ("pending", "claimed") else "left",
            # A name is folded, never cut: tenants' names share long prefixes (an org's
            # UUID), and an operator copies one into groups set.
            overflow="fold" if name in ("group", "waits") else "ellipsis",
            no_wrap=name not in ("group", "waits"),
        )
    for g in rows:
        # A group's name is the application's, given as Text: "[bold]" in it is text, not
        # markup; rich.markup.escape doubled a trailing backslash and printed "a\[b" as "a[b".
        # A name that does not read as itself ("acme ", "acme\u200b") prints as its repr.
        table.add_row(
            Text(shown_name(g.group)),
            str(g.pending),
            str(g.claimed),
            _cap_text(g.cap, g.task_cap),
            "1" if g.weight is None else weight_shown(g.weight),
            "paused" if g.paused else "active",
            str(g.recent),
            Text(g.waiting or ""),
        )
    console.print(table)


def _cap_text(cap: int | None, task_cap: int | None) -> str:
    if cap is not None:
        return str(cap)
    return "—" if task_cap is None else f"{task_cap} (task)"


@groups_app.command("show")
def groups_show(
    kind: KindArgument,
    group: GroupArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """One group of KIND: its counts, settings and why its pending jobs wait. A GROUP
    starting with '-' follows `--`: `venturi groups show KIND -- -name`."""
    from venturi.admin.groups import show_group

    checked(lambda g: check_group(g, new=False), group)
    target = need_dsn(dsn)
    g = admin_run(target, schema, lambda c: show_group(c, kind, group, schema=schema))
    if g is None:
        raise fail(f"no group {group!r} of kind {kind!r}")
    if as_json:
        echo_json(g)
        return
    weight = "1 (default)" if g.weight is None else weight_shown(g.weight)
    for label, value in (
        ("group", shown_name(g.group)),
        ("kind", kind),
        ("pending", g.pending),
        ("claimed", g.claimed),
        ("cap", _cap_text(g.cap, g.task_cap)),
        ("weight", weight),
        ("state", "paused" if g.paused else "active"),
        ("claimed in the last minute", g.recent),
        ("pending jobs wait", g.waiting or "—"),
    ):
        say(f"{label}: {value}")
