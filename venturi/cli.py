"""The ``venturi`` command line (typer). Errors are one line on stderr and exit code 2."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer

from venturi import registry, sql, store
from venturi.backoff import DEFAULT_BACKOFF
from venturi.errors import ConfigError, VenturiError

T = TypeVar("T")

app = typer.Typer(
    name="venturi",
    help="Durable background jobs on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
schema_app = typer.Typer(help="Render or apply the database schema.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn", envvar="VENTURI_DSN", help="PostgreSQL DSN (or VENTURI_DSN).", show_default=False
    ),
]
SchemaOption = Annotated[str, typer.Option("--schema", help="Schema that holds venturi's tables.")]


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


@schema_app.command("render")
def schema_render(
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    part: Annotated[str, typer.Option("--part", help="all | tables | indexes | claim")] = "all",
) -> None:
    """Print the schema SQL. Never connects to a database; the output is deterministic."""
    try:
        text = sql.render(schema, part)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(text)


@schema_app.command("apply")
def schema_apply(dsn: DsnOption = None, schema: SchemaOption = sql.DEFAULT_SCHEMA) -> None:
    """Create or upgrade the schema; applying twice changes nothing the second time."""
    target = _need_dsn(dsn)
    try:
        sql.validate_schema(schema)
    except ConfigError as exc:
        raise fail(str(exc)) from None

    async def go() -> list[int]:
        conn = await store.connect(target)
        try:
            return await store.apply_schema(conn, schema)
        finally:
            await conn.close()

    applied = _run(go)
    if applied:
        typer.echo(f"schema {schema}: applied migration(s) {', '.join(map(str, applied))}")
    else:
        typer.echo(f"schema {schema}: up to date")


@app.command("recover")
def recover(dsn: DsnOption = None, schema: SchemaOption = sql.DEFAULT_SCHEMA) -> None:
    """Return expired claims to pending now (the manual stale sweep)."""
    target = _need_dsn(dsn)

    async def go() -> list[Any]:
        conn = await store.connect(target)
        try:
            await store.schema_version(conn, schema)
            who = f"venturi recover ({os.getpid()})"
            return await store.recover_stale(conn, schema, who, DEFAULT_BACKOFF)
        finally:
            await conn.close()

    rows = _run(go)
    for r in rows:
        typer.echo(f"job {r['id']} ({r['kind']}): {r['status']}, claimed by {r['claimed_by']}")
    typer.echo(f"recovered {len(rows)} expired claim(s)")


def load_target(target: str) -> tuple[list[registry.Task[Any]], Any]:
    """Import ``MODULE[:STATE]``; returns the tasks the module declared and the state.

    STATE names an attribute of the module: a callable (sync or async) is called to build
    the state, anything else is the state itself.
    """
    module_name, _, attr = target.partition(":")
    before = set(registry.registered())
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise fail(f"cannot import {module_name!r}: {exc}") from None
    finally:
        sys.path.pop(0)
    mine = [
        t
        for t in registry.registered().values()
        if getattr(t.fn, "__module__", None) == module.__name__
    ]
    # A module that only imports its tasks from elsewhere: take what its import declared.
    tasks = mine or [t for k, t in registry.registered().items() if k not in before]
    if not tasks:
        raise fail(f"module {module_name!r} declares no @venturi.task")
    state: Any = None
    if attr:
        if not hasattr(module, attr):
            raise fail(f"module {module_name!r} has no attribute {attr!r}")
        state = getattr(module, attr)
    return tasks, state


async def _build_state(state: Any) -> Any:
    if callable(state) and not isinstance(state, type):
        state = state()
    elif isinstance(state, type):
        state = state()
    if inspect.isawaitable(state):
        state = await state
    return state


def install_signal_handlers(shutdown: asyncio.Event) -> None:
    """SIGINT/SIGTERM set the shutdown event; a second one stops at once."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        if shutdown.is_set():
            os._exit(130)
        shutdown.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)


@app.command("worker")
def worker(
    target: Annotated[str, typer.Argument(help="MODULE[:STATE] declaring the tasks to run.")],
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    concurrency: Annotated[
        int | None, typer.Option(help="In-flight jobs (default max(1, min(8, cores/2))).")
    ] = None,
    poll_max: Annotated[float, typer.Option(help="Longest idle wait, seconds.")] = 30.0,
    lease: Annotated[float, typer.Option(help="Default lease, seconds.")] = 900.0,
    shutdown_timeout: Annotated[
        float, typer.Option(help="Grace before force-release, seconds.")
    ] = 30.0,
    priority_ratio: Annotated[
        int, typer.Option(help="Anti-starvation ratio; 0 = strict priority.")
    ] = 4,
    failures_to_dead: Annotated[
        bool, typer.Option(help="Settle a raised exception dead at once.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "info",
) -> None:
    """Run a worker over the tasks declared in MODULE until SIGINT/SIGTERM."""
    target_dsn = _need_dsn(dsn)
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise fail(f"log-level must be debug, info, warning or error, got {log_level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tasks, state_src = load_target(target)

    from venturi.worker import Worker

    async def go() -> None:
        state = await _build_state(state_src)
        w = Worker(
            state,
            target_dsn,
            tasks,
            concurrency=concurrency,
            poll_max=poll_max,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
            priority_ratio=priority_ratio or None,
            failures_to_dead=failures_to_dead,
            schema=schema,
        )
        shutdown = asyncio.Event()
        install_signal_handlers(shutdown)
        await w.run(shutdown)

    _run(go)


@app.command("demo")
def demo(
    dsn: DsnOption = None,
    jobs: Annotated[int, typer.Option(help="Bookmarks to fetch (emails are half as many).")] = 200,
) -> None:
    """The design document's bookmark service, end to end, on an embedded database."""
    from venturi import demo as demo_module

    if jobs < 1:
        raise fail(f"jobs must be >= 1, got {jobs}")
    _run(lambda: demo_module.main(dsn, jobs))


def main() -> None:
    app()
