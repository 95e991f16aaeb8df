"""The ``venturi`` Typer app every command group registers on (what the commands share
is in ``venturi.cli.common``)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="venturi",
    help="Durable background jobs on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def main() -> None:
    app()
