"""The ``venturi`` Typer app every command group registers on (what the commands share
is in ``venturi.cli.common``)."""

from __future__ import annotations

import inspect

import typer

app = typer.Typer(
    name="venturi",
    help="Durable background jobs on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def one_line_summaries(group: typer.Typer) -> None:
    """Give each command of ``group`` (and of its sub-groups) without a ``short_help`` its
    docstring's first paragraph on one line, for the list of commands in ``--help``.

    Typer's rich help keeps a summary's source line breaks, so a docstring wrapped at
    the code's width printed broken mid-sentence in ``venturi --help``; the command's
    own ``--help`` page joins them already.
    """
    for command in group.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if command.short_help is None and text:
            command.short_help = " ".join(text.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            one_line_summaries(sub.typer_instance)


def main() -> None:
    app()
