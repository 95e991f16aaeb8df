"""What every ``venturi`` command shares: the --dsn, --schema, --json and --liveness
options, one-line errors (exit code 2), running a coroutine, connecting for an
operator's call, and the console and JSON output."""

from __future__ import annotations

import asyncio
import contextlib
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


# Once a command's coroutine has returned, how long the tasks it left behind get to end
# after they are cancelled. asyncio.Runner's own close cancels them and waits without a
# limit: a worker's handler that ignores its cancellation (the worker abandons it after
# its clean-up time) kept `venturi worker` alive 30 s after it logged "stopped", while
# another worker already ran its released job.
LEFTOVERS_WITHIN = 1.0


def run(
    coro_fn: Callable[[], Awaitable[T]],
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """Run a coroutine (on a loop from ``loop_factory``, else asyncio's own), turning
    venturi's own errors into one-line exits. Tasks it leaves running are cancelled and
    get ``LEFTOVERS_WITHIN`` seconds to end; the command does not wait for the rest."""
    # A Runner for its handling of Ctrl-C, but not its close (see LEFTOVERS_WITHIN).
    runner = asyncio.Runner(loop_factory=loop_factory)
    try:
        return runner.run(coro_fn())  # type: ignore[arg-type]
    except VenturiError as exc:
        raise fail(str(exc)) from None
    finally:
        _close(runner.get_loop())
        if loop_factory is None:  # the Runner made its loop the thread's: undo that
            asyncio.set_event_loop(None)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio.Runner's close, each wait bounded by ``LEFTOVERS_WITHIN``."""
    try:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=LEFTOVERS_WITHIN))
        stuck = [t for t in left if not t.done()]
        for task in stuck:
            # Left for good: the loop never runs them again, so they say nothing more
            # ("Task was destroyed but it is pending!" when collected).
            task._log_destroy_pending = False  # type: ignore[attr-defined]
        if stuck:
            say(
                f"venturi: {len(stuck)} task(s) ignored their cancellation for "
                f"{LEFTOVERS_WITHIN:g}s after the command ended; exiting without them",
                err=True,
            )
        for task in left:
            if task.done() and not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler(
                    {
                        "message": "unhandled exception as the command ended",
                        "exception": task.exception(),
                        "task": task,
                    }
                )
        for closing in (loop.shutdown_asyncgens(), loop.shutdown_default_executor()):
            with contextlib.suppress(TimeoutError):
                loop.run_until_complete(asyncio.wait_for(closing, LEFTOVERS_WITHIN))
    finally:
        loop.close()


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
