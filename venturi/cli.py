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
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import asyncpg
import typer

from venturi import db, registry, sql
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
        conn = await db.connect.connect(target)
        try:
            return await db.schema.apply_schema(conn, schema=schema)
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
        conn = await db.connect.connect(target)
        try:
            await db.schema.schema_version(conn, schema=schema)
            who = f"venturi recover ({os.getpid()})"
            # Jobs carry their task's backoff; DEFAULT_BACKOFF is for tasks that declared none.
            return await db.jobs.job_recover_stale(
                conn, schema=schema, recoverer=who, backoff=DEFAULT_BACKOFF
            )
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
    if not module_name.strip():
        raise fail("no module given: name the module that declares the tasks, e.g. app.tasks")
    if "/" in module_name or "\\" in module_name or module_name.endswith(".py"):
        parts = module_name.removesuffix(".py").replace("\\", "/").split("/")
        dotted = ".".join(p for p in parts if p not in ("", ".", ".."))
        raise fail(
            f"{module_name!r} is a file path: give the dotted module name instead, "
            f"e.g. {dotted} (from the directory that holds its top package)"
        )
    if module_name.startswith("."):
        raise fail(f"{module_name!r} is a relative name: give the full dotted module name")
    before = set(registry.registered())
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise fail(f"cannot import {module_name!r}: {exc}") from None
    except VenturiError as exc:
        # A task declared with a bad knob (cron, lease, carry annotation): the message
        # names the knob, which is all the operator needs.
        raise fail(f"importing {module_name!r}: {exc}") from None
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


async def _build_state(state: Any, name: str) -> Any:
    """Call (and await) a STATE factory; one that raises is a one-line error naming it
    (the traceback is logged at debug level, for ``--log-level debug``)."""
    try:
        if callable(state):
            state = state()
        if inspect.isawaitable(state):
            state = await state
    except Exception as exc:
        logging.getLogger("venturi.cli").debug("STATE %s raised", name, exc_info=True)
        raise fail(f"STATE {name} raised {type(exc).__name__}: {db.errors.one_line(exc)}") from None
    return state


STRICT = "strict"


def parse_priority_ratio(value: str) -> int | None:
    """``--priority-ratio``: an integer >= 2, or ``strict`` (any case) for strict priority."""
    if value.strip().lower() == STRICT:
        return None
    try:
        ratio = int(value)
    except ValueError:
        ratio = 0
    if ratio < 2:
        raise fail(
            f"priority-ratio must be an integer >= 2, or {STRICT!r} for strict priority, "
            f"got {value!r}"
        )
    return ratio


def _serve_metrics(port: int) -> None:
    """Start the exporter before the worker does (its own start is then a no-op), so a
    port that is taken is a one-line error rather than a traceback from inside run()."""
    from venturi.runtime import instruments as metrics

    try:
        metrics.serve(port)
    except OSError as exc:
        raise fail(
            f"metrics-port {port}: cannot listen ({exc.strerror or exc}); "
            "choose a free port or stop what holds it"
        ) from None


# After a second signal, how long releasing the running jobs may take before the process
# exits regardless (the database may be what is not answering).
FORCED_EXIT_WITHIN = 15.0


def _exit_now(message: str) -> None:
    typer.echo(f"venturi: {message}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: a handler blocked in a thread, or one that ignores its cancellation,
    # would hold the interpreter's shutdown.
    os._exit(130)


def install_signal_handlers(
    shutdown: asyncio.Event, force: Callable[[], None] | None = None, grace: float | None = None
) -> None:
    """SIGINT/SIGTERM set the shutdown event (handlers get ``grace`` seconds to wind
    down); a second one calls ``force``, which should stop at once, releasing the running
    jobs; a third (or a second without ``force``) exits at once."""
    loop = asyncio.get_running_loop()
    signals = 0

    def stop() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            within = "" if grace is None else f" up to {grace:g}s"
            typer.echo(
                f"venturi: stopping: running jobs get{within} to finish; a second signal "
                "releases them and exits at once",
                err=True,
            )
            shutdown.set()
        elif signals == 2 and force is not None:
            force()
        else:
            _exit_now("stopped at once; running jobs are recovered when their leases expire")

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)


@app.command("worker")
def worker(
    ctx: typer.Context,
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
        str,
        typer.Option(
            help="Anti-starvation ratio (an integer >= 2), or 'strict' for strict priority."
        ),
    ] = "4",
    failures_to_dead: Annotated[
        bool, typer.Option(help="Settle a raised exception dead at once.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "info",
    processes: Annotated[
        int, typer.Option(help="Worker processes, each restarted 1 s after it dies.")
    ] = 1,
    renew_lease: Annotated[
        bool, typer.Option(help="Extend running jobs' leases every third of a lease.")
    ] = False,
    heartbeat: Annotated[
        float, typer.Option(help="Seconds between checks of running jobs (cancel requests).")
    ] = 1.0,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus metrics on this port.")
    ] = None,
) -> None:
    """Run a worker over the tasks declared in MODULE until SIGINT/SIGTERM.

    Recurring tasks (cron) and results with a TTL get their maintenance task."""
    target_dsn = _need_dsn(dsn)
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise fail(f"log-level must be debug, info, warning or error, got {log_level!r}")
    ratio = parse_priority_ratio(priority_ratio)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tasks, state_src = load_target(target)
    if processes != 1:
        from venturi import supervisor

        if processes < 1:
            raise fail(f"processes must be >= 1, got {processes}")
        args = supervisor.child_arguments(ctx)
        raise typer.Exit(supervisor.run_processes(processes, args, target_dsn))

    from venturi.runtime.worker import Worker
    from venturi.supervisor import default_maintenance

    async def go() -> None:
        state = await _build_state(state_src, target)
        w = Worker(
            state,
            target_dsn,
            tasks,
            concurrency=concurrency,
            poll_max=poll_max,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
            priority_ratio=ratio,
            failures_to_dead=failures_to_dead,
            schema=schema,
            maintenance=default_maintenance(tasks),
            renew_lease=renew_lease,
            heartbeat=heartbeat,
            metrics_port=metrics_port,
        )
        if metrics_port is not None:
            _serve_metrics(metrics_port)
        shutdown = asyncio.Event()
        run = asyncio.create_task(w.run(shutdown))
        running: list[int] = []

        def force() -> None:
            # The worker's run, cancelled, cancels its handlers and releases their jobs
            # (journal "released") before it returns.
            running.append(w.jobs_held())
            run.cancel()
            asyncio.get_running_loop().call_later(
                FORCED_EXIT_WITHIN,
                _exit_now,
                f"stopped at once; could not release the running jobs within "
                f"{FORCED_EXIT_WITHIN:g}s: they are recovered when their leases expire",
            )

        install_signal_handlers(shutdown, force, shutdown_timeout)
        try:
            await run
        except asyncio.CancelledError:
            if not running:
                raise
            left = w.jobs_unsettled()  # what the database did not take back
            done = running[0] - left
            said = f"stopped at once on a second signal: released {done} running job"
            said += "" if done == 1 else "s"
            if left:
                said += f"; {left} more are recovered when their leases expire"
            _exit_now(said)

    _run(go)


@app.command("demo")
def demo(
    dsn: DsnOption = None,
    jobs: Annotated[int, typer.Option(help="Bookmarks to fetch (emails are half as many).")] = 200,
) -> None:
    """A bookmark service (fetch pages, send emails), end to end, on an embedded database."""
    from venturi import demo as demo_module

    if jobs < 1:
        raise fail(f"jobs must be >= 1, got {jobs}")
    _run(lambda: demo_module.main(dsn, jobs))


# --- operator commands: jobs, stats, purge, top ------------------------------------------

jobs_app = typer.Typer(help="Inspect and repair jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table.")
]
IdsArgument = Annotated[list[int], typer.Argument(help="Job ids.", show_default=False)]


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


@jobs_app.command("list")
def jobs_list(
    status: Annotated[
        str | None, typer.Option(help="pending, claimed, completed, dead or cancelled.")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    limit: Annotated[int, typer.Option(help="Most jobs to show, newest first.")] = 50,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """List jobs, newest first."""
    from venturi import admin, views

    target = _need_dsn(dsn)
    rows = _admin_run(
        target,
        schema,
        lambda c: admin.list_jobs(c, status=status, kind=kind, limit=limit, schema=schema),
    )
    if as_json:
        _echo_json(rows)
        return
    console = _console()
    if not rows:
        console.print("no jobs")
        return
    console.print(views.jobs_table(rows, datetime.now(UTC)))


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[int, typer.Argument(metavar="ID", help="The job id.")],
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Show one job: its row, decoded carry and result, journal and tracebacks."""
    from venturi import admin, views

    target = _need_dsn(dsn)
    detail = _admin_run(target, schema, lambda c: admin.show_job(c, job_id, schema=schema))
    if detail is None:
        raise fail(f"job {job_id} does not exist")
    if as_json:
        _echo_json(detail)
        return
    _console().print(views.job_detail(detail, datetime.now(UTC)))


def _report(changes: list[Any], as_json: bool, summary: str) -> None:
    """Each change on stdout, each refusal as a one-line error on stderr, then a summary;
    exit 2 when anything was refused."""
    if as_json:
        _echo_json(changes)
    else:
        for c in changes:
            if c.done:
                typer.echo(c.message)
            else:
                typer.echo(f"venturi: {c.message}", err=True)
        typer.echo(summary)
    if not all(c.done for c in changes):
        raise typer.Exit(2)


@jobs_app.command("retry")
def jobs_retry(
    ids: IdsArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Send dead or cancelled jobs back to pending, visible now, with a fresh failure
    budget (journaled as retried: manual retry). Exit 2 if any job was refused."""
    from venturi import admin

    target = _need_dsn(dsn)
    changes = _admin_run(target, schema, lambda c: admin.retry_jobs(c, ids, schema=schema))
    done = sum(c.done for c in changes)
    _report(changes, as_json, f"retried {done} of {len(changes)} job(s)")


@jobs_app.command("cancel")
def jobs_cancel(
    ids: IdsArgument,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Cancel pending jobs; for a claimed job, ask its worker to stop it (the worker
    settles it cancelled). Exit 2 if any job was refused."""
    from venturi import admin

    target = _need_dsn(dsn)
    changes = _admin_run(target, schema, lambda c: admin.cancel_jobs(c, ids, schema=schema))
    cancelled = sum(c.now == "cancelled" for c in changes)
    asked = sum(c.done and c.now == "claimed" for c in changes)
    refused = sum(not c.done for c in changes)
    _report(
        changes,
        as_json,
        f"cancelled {cancelled}, asked {asked} running to stop, refused {refused}",
    )


@app.command("stats")
def stats(
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Per kind: jobs in each status, the oldest due job's wait, completions in the last
    minute and failed executions in the last hour."""
    from venturi import admin, views

    target = _need_dsn(dsn)
    result = _admin_run(target, schema, lambda c: admin.stats(c, schema=schema))
    if as_json:
        _echo_json(result)
        return
    console = _console()
    if not result.kinds:
        console.print("no jobs")
        return
    console.print(views.stats_table(result))


@app.command("purge")
def purge(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Finished longer ago than this: 90s, 15m, 12h, 7d, 2w, 1h30m."
        ),
    ],
    status: Annotated[str, typer.Option(help="completed, dead or cancelled.")] = "completed",
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    batch: Annotated[int, typer.Option(help="Rows deleted per statement.")] = 1000,
    dry_run: Annotated[bool, typer.Option(help="Count what would go; delete nothing.")] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Retention: delete finished jobs (and their journal) in batches."""
    from venturi import admin

    target = _need_dsn(dsn)
    try:
        secs = admin.parse_duration(older_than)
    except ConfigError as exc:
        raise fail(f"older-than: {exc}") from None

    async def work(conn: Any) -> int:
        if dry_run:
            return await admin.purge_count(
                conn, status=status, older_than=secs, kind=kind, schema=schema
            )
        return await admin.purge(
            conn, status=status, older_than=secs, kind=kind, batch=batch, schema=schema
        )

    n = _admin_run(target, schema, work)
    if as_json:
        _echo_json(
            {
                "status": status,
                "older_than_seconds": secs,
                "kind": kind,
                "dry_run": dry_run,
                "jobs": n,
            }
        )
        return
    which = f"{status} job(s)" + (f" of kind {kind}" if kind else "")
    verb = "would purge" if dry_run else "purged"
    typer.echo(f"{verb} {n} {which} finished more than {older_than} ago")


@app.command("top")
def top(
    interval: Annotated[float, typer.Option(help="Seconds between frames.")] = 1.0,
    window: Annotated[float, typer.Option(help="Seconds over which done/s is averaged.")] = 10.0,
    once: Annotated[bool, typer.Option(help="Print one frame and exit.")] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """A live view: per kind pending / claimed / done per second / failed / dead and the
    oldest due job's wait, and the workers holding claims. Ctrl-C quits."""
    from venturi import admin, views

    target = _need_dsn(dsn)
    if not interval > 0 or not window > 0:
        raise fail("interval and window must be positive numbers of seconds")

    async def frame(conn: Any) -> admin.TopFrame:
        return await admin.top_frame(conn, completed_window=window, schema=schema)

    if once or as_json:
        result = _admin_run(target, schema, frame)
        if as_json:
            _echo_json(result)
        else:
            _console().print(views.top(result))
        return
    with contextlib.suppress(KeyboardInterrupt):
        _run(lambda: _top_live(target, schema, interval, frame))


async def _top_live(
    target: str,
    schema: str,
    interval: float,
    read: Callable[[Any], Awaitable[Any]],
    *,
    console: Any = None,
    frames: int | None = None,
) -> None:
    """Redraw every ``interval`` seconds (``frames`` times, or until interrupted); a lost
    connection is shown and retried, so the view outlives a database restart."""
    from rich.live import Live
    from rich.text import Text

    from venturi import views

    conn = await db.connect.connect(target)
    drawn = 0
    try:
        await db.schema.schema_version(conn, schema=schema)
        with Live(console=console or _console(), auto_refresh=False, screen=False) as live:
            while frames is None or drawn < frames:
                if drawn:
                    await asyncio.sleep(interval)
                drawn += 1
                try:
                    if conn is None:
                        conn = await db.connect.connect(target)
                    live.update(views.top(await read(conn)), refresh=True)
                except (
                    OSError,
                    asyncpg.PostgresError,
                    asyncpg.InterfaceError,
                    VenturiError,
                ) as exc:
                    live.update(
                        Text(f"database error, retrying: {db.errors.one_line(exc)}"), refresh=True
                    )
                    if conn is not None:
                        conn.terminate()
                    conn = None
    finally:
        if conn is not None:
            await conn.close()


def main() -> None:
    app()


# --- per-kind queue pause ------------------------------------------------------------------

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
