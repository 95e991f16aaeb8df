"""The ``venturi`` Typer app, and what every command shares: the --dsn and --schema
options, one-line errors (exit code 2), running a coroutine, connecting for an
operator command."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import asyncpg
import typer

from venturi import db, validate
from venturi.errors import ConfigError, VenturiError

T = TypeVar("T")


app = typer.Typer(
    name="venturi",
    help="Durable background jobs on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn", envvar="VENTURI_DSN", help="PostgreSQL DSN (or VENTURI_DSN).", show_default=False
    ),
]


SchemaOption = Annotated[str, typer.Option("--schema", help="Schema that holds venturi's tables.")]


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table.")
]


LivenessOption = Annotated[
    float,
    typer.Option("--liveness", help="Seconds without a heartbeat after which a worker is gone."),
]

DEFAULT_LIVENESS = 30.0


def liveness_seconds(value: float) -> float:
    """``--liveness``: a positive, finite number of seconds."""
    try:
        return validate.seconds(value, "liveness")
    except ConfigError as exc:
        raise fail(str(exc)) from None


def fail(message: str) -> typer.Exit:
    typer.echo(f"venturi: {message}", err=True)
    return typer.Exit(2)


def _run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine, turning venturi's own errors into one-line exits."""
    try:
        return asyncio.run(coro_fn())  # type: ignore[arg-type]
    except VenturiError as exc:
        raise fail(str(exc)) from None


def _need_dsn(dsn: str | None) -> str:
    if not dsn:
        raise fail("no database given: pass --dsn or set VENTURI_DSN")
    return dsn


def _console() -> Any:
    from rich.console import Console

    # Piped output has no terminal width; rich's default of 80 columns would wrap tables.
    wide = sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))
    return Console(width=None if wide else 160, highlight=False, soft_wrap=False)


def _admin_run(target: str, schema: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Connect, check the schema, run ``work(conn)``; every error is one line, exit 2."""

    async def go() -> T:
        conn = await db.connect.connect(target)
        try:
            await db.schema.schema_version(conn, schema=schema)
            return await work(conn)
        finally:
            await conn.close()

    try:
        return _run(go)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise fail(f"database error: {db.errors.one_line(exc)}") from None


def _echo_json(value: Any) -> None:
    from venturi import views

    sys.stdout.write(views.to_json(value) + "\n")


def main() -> None:
    app()
