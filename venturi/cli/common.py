"""What every ``venturi`` command shares: the --dsn, --schema, --json and --liveness
options, one-line errors (exit code 2), running a coroutine, connecting for an
operator's call, and the console and JSON output."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer

from venturi import validate
from venturi.db.errors import DATABASE_ERRORS, one_line
from venturi.errors import ConfigError, VenturiError
from venturi.formatting import terminal_safe, to_json

T = TypeVar("T")


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


def liveness_seconds(value: float) -> float:
    """``--liveness``: a positive, finite number of seconds."""
    try:
        return validate.seconds(value, "liveness")
    except ConfigError as exc:
        raise fail(str(exc)) from None


def checked(check: Callable[[Any], T], value: Any) -> T:
    """``check(value)``, its ``ConfigError`` a one-line exit (before any connection)."""
    try:
        return check(value)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def fail(message: str) -> typer.Exit:
    """Print ``venturi: message`` on stderr; the exit (code 2) for the caller to raise."""
    say(f"venturi: {message}", err=True)
    return typer.Exit(2)


def say(text: str, *, err: bool = False) -> None:
    """A line of a command's output, the application's names and text in it with nothing
    that acts on the terminal (``terminal_safe``): a kind holding ESC[2J cleared the
    operator's screen in "paused ...", a CR overwrote the line, a newline split it."""
    typer.echo(terminal_safe(text), err=err)


def run(
    coro_fn: Callable[[], Awaitable[T]],
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """Run a coroutine (on a loop from ``loop_factory``, else asyncio's own), turning
    venturi's own errors into one-line exits."""
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(coro_fn())  # type: ignore[arg-type]
    except VenturiError as exc:
        raise fail(str(exc)) from None


def need_dsn(dsn: str | None) -> str:
    """The DSN given (--dsn or VENTURI_DSN), or a one-line exit saying none was."""
    if not dsn:
        raise fail("no database given: pass --dsn or set VENTURI_DSN")
    return dsn


def make_console() -> Any:
    """A rich console for tables: the terminal's width, or 160 columns when piped."""
    from rich.console import Console

    # Piped output has no terminal width; rich's default of 80 columns would wrap tables.
    wide = sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))
    return Console(width=None if wide else 160, highlight=False, soft_wrap=False)


def admin_run(target: str, schema: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Connect, check the schema, run ``work(conn)``; every error is one line, exit 2."""

    from venturi.admin import connection  # not at import: see venturi/cli/__init__.py

    async def go() -> T:
        conn = await connection.connect(target, schema=schema)
        try:
            return await work(conn)
        finally:
            await conn.close()

    try:
        return run(go)
    except DATABASE_ERRORS as exc:
        raise fail(f"database error: {one_line(exc)}") from None


def echo_json(value: Any) -> None:
    """Print ``value``'s JSON form (what ``--json`` prints) on stdout."""
    sys.stdout.write(to_json(value) + "\n")


__all__ = [
    "DsnOption",
    "JsonOption",
    "LivenessOption",
    "SchemaOption",
    "admin_run",
    "checked",
    "echo_json",
    "fail",
    "liveness_seconds",
    "make_console",
    "need_dsn",
    "run",
]
