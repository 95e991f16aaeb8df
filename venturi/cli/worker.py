"""``venturi worker`` (one process, or several under a supervisor) and ``venturi recover``:
loading MODULE[:STATE], the options a worker takes, what maintenance it runs."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypedDict, Unpack

import typer

from venturi import logs, sql
from venturi.cli import worker_options as opt
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    LivenessOption,
    SchemaOption,
    admin_run,
    checked,
    fail,
    liveness_seconds,
    need_dsn,
    run,
    say,
)
from venturi.cli.signals import FORCED_EXIT_WITHIN, exit_now, install_signal_handlers
from venturi.db.errors import one_line
from venturi.errors import VenturiError
from venturi.status import DEFAULT_LIVENESS
from venturi.tasks import Task, registered


@app.command("recover")
def recover(
    worker_id: Annotated[
        str | None,
        typer.Option(
            "--worker",
            help="Recover this gone worker's claims now, expired or not: its id (or a "
            "unique prefix) or its name, from `venturi workers`.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="With --worker: recover it even if it is live.")
    ] = False,
    liveness: LivenessOption = DEFAULT_LIVENESS,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Return expired claims to pending now (the manual stale sweep); with --worker, the
    claims of one worker that is gone, at once. Each counts as a failed execution."""
    target = need_dsn(dsn)
    secs = liveness_seconds(liveness)
    if worker_id is not None:
        _recover_worker(target, schema, worker_id, force, secs)
        return
    if force:
        raise fail("--force goes with --worker")
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    async def go() -> list[Any]:
        conn = await admin.connection.connect(target, schema=schema)
        try:
            who = f"venturi recover ({os.getpid()})"
            return await admin.recover_expired(conn, recoverer=who, schema=schema)
        finally:
            await conn.close()

    rows = run(go)
    for r in rows:
        say(f"job {r['id']} ({r['kind']}): {r['status']}, claimed by {r['claimed_by']}")
    say(f"recovered {len(rows)} expired claim(s)")


def _recover_worker(target: str, schema: str, worker: str, force: bool, liveness: float) -> None:
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    done = admin_run(
        target,
        schema,
        lambda c: admin.recover_worker(c, worker, force=force, liveness=liveness, schema=schema),
    )
    w = done.worker
    for change in done.jobs:
        say(change.message)
    say(f"recovered {len(done.jobs)} claim(s) of worker {w.name} ({w.id}, {w.state})")


def load_target(target: str) -> tuple[list[Task[Any]], Any]:
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
    before = set(registered())
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise fail(f"cannot import {module_name!r}: {exc}") from None
    except VenturiError as exc:
        # A task declared with a bad knob (cron, lease, carry annotation): the message
        # names the knob, which is all the operator needs.
        raise fail(f"importing {module_name!r}: {exc}") from None
    except Exception as exc:
        # The application's own module is broken (a SyntaxError, a RuntimeError at import):
        # one line naming the error and where it was raised; the traceback only at debug.
        log = logging.getLogger("venturi.cli")
        log.debug("importing %s raised", module_name, exc_info=True)
        said = _import_error(exc)
        if not log.isEnabledFor(logging.DEBUG):
            said += "; --log-level debug shows the traceback"
        raise fail(f"importing {module_name!r} raised {said}") from None
    finally:
        sys.path.pop(0)
    mine = [
        t for t in registered().values() if getattr(t.fn, "__module__", None) == module.__name__
    ]
    # A module that only imports its tasks from elsewhere: take what its import declared.
    tasks = mine or [t for k, t in registered().items() if k not in before]
    if not tasks:
        raise fail(f"module {module_name!r} declares no @venturi.task")
    state: Any = None
    if attr:
        if not hasattr(module, attr):
            raise fail(f"module {module_name!r} has no attribute {attr!r}")
        state = getattr(module, attr)
    return tasks, state


def _import_error(exc: Exception) -> str:
    """``RuntimeError: boom (tasks.py, line 4)``: the error and where it was raised (a
    SyntaxError's text already says where)."""
    said = f"{type(exc).__name__}: {one_line(exc)}"
    if not isinstance(exc, SyntaxError):
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            said += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    return said


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
        raise fail(f"STATE {name} raised {type(exc).__name__}: {one_line(exc)}") from None
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


LOOPS = ("auto", "uvloop", "asyncio")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def parse_loop(value: str) -> tuple[str, LoopFactory | None]:
    """``--loop``: the event loop's name and factory (None: asyncio's own). ``auto`` is
    uvloop where it is importable (installed with venturi on CPython outside Windows),
    asyncio elsewhere; ``uvloop`` without uvloop installed is an error, not a fallback."""
    name = value.strip().lower()
    if name not in LOOPS:
        raise fail(f"loop must be auto, uvloop or asyncio, got {value!r}")
    if name == "asyncio":
        return name, None
    try:
        import uvloop
    except ImportError:
        if name == "auto":
            return "asyncio", None
        raise fail(
            "loop uvloop: uvloop is not installed (pip install uvloop); or run with --loop asyncio"
        ) from None
    return "uvloop", uvloop.new_event_loop


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


def default_maintenance(
    tasks: Iterable[Any], *, queue_metrics: bool = False, warn_unserved: bool = False
) -> list[Any]:
    """What ``venturi worker`` runs beside its loop for these tasks: always the
    dashboard's ``SearchIndex``, the ``History`` that moves finished jobs out of the live
    table and the ``Vacuum`` that keeps its dead row versions few; a ``CronScheduler``
    when one of them is recurring (``cron=`` or ``venturi.schedule``), a
    ``ResultCleanup`` when one keeps results for a ``result_ttl``; ``QueueGauges`` and
    ``UnservedKinds`` when asked for."""
    from venturi.maintenance.cron import CronScheduler
    from venturi.maintenance.history import History
    from venturi.maintenance.results import ResultCleanup
    from venturi.maintenance.search import SearchIndex
    from venturi.maintenance.vacuum import Vacuum
    from venturi.schedules import schedules_for

    tasks = list(tasks)
    found: list[Any] = [SearchIndex(), History(), Vacuum()]
    if schedules_for(t.kind for t in tasks):
        found.append(CronScheduler())
    if any(t.result_ttl is not None for t in tasks):
        found.append(ResultCleanup())
    if queue_metrics:
        from venturi.maintenance.gauges import QueueGauges

        found.append(QueueGauges())
    if warn_unserved:
        from venturi.maintenance.unserved import UnservedKinds

        found.append(UnservedKinds())
    return found


@app.command("worker")
def worker(
    ctx: typer.Context,
    target: opt.Target,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    concurrency: opt.Concurrency = None,
    poll_max: opt.PollMax = 30.0,
    lease: opt.Lease = 900.0,
    shutdown_timeout: opt.ShutdownTimeout = 30.0,
    priority_ratio: opt.PriorityRatio = "4",
    failures_to_dead: opt.FailuresToDead = False,
    log_level: opt.LogLevel = "info",
    processes: opt.Processes = 1,
    renew_lease: opt.RenewLease = False,
    heartbeat: opt.Heartbeat = 1.0,
    metrics_port: opt.MetricsPort = None,
    statement_timeout: opt.StatementTimeout = None,
    synchronous_commit: opt.SynchronousCommit = True,
    listen_dsn: opt.ListenDsn = None,
    queue_metrics: opt.QueueMetrics = False,
    warn_unserved: opt.WarnUnserved = False,
    log_format: opt.LogFormat = "text",
    loop: opt.Loop = "auto",
    middleware: opt.Middleware = None,
) -> None:
    """Run a worker over the tasks declared in MODULE until SIGINT/SIGTERM.

    Recurring tasks (cron) and results with a TTL get their maintenance task."""
    target_dsn = need_dsn(dsn)
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise fail(f"log-level must be debug, info, warning or error, got {log_level!r}")
    ratio = parse_priority_ratio(priority_ratio)
    if log_format not in logs.FORMATS:
        raise fail(f"log-format must be text or json, got {log_format!r}")
    if queue_metrics and metrics_port is None:
        raise fail("--queue-metrics goes with --metrics-port")
    _, loop_factory = parse_loop(loop)
    chain = load_middleware(middleware or [])
    logs.configure(level, log_format)
    tasks, state_src = load_target(target)
    # Two schedules of one name: refused here, before any process starts (a
    # venturi.schedule declared before the task whose own cron= has its name).
    from venturi.schedules import schedules_for

    checked(schedules_for, [t.kind for t in tasks])
    if processes != 1:
        from venturi.cli import processes as supervisor

        # At most MAX_PROCESSES: 99999999999 passed, and the supervisor set out to start
        # them all.
        if not 1 <= processes <= supervisor.MAX_PROCESSES:
            raise fail(
                f"processes must be from 1 to {supervisor.MAX_PROCESSES} (one per core is "
                f"the rule), got {processes}"
            )
        args = supervisor.child_arguments(ctx, skip=("processes", "dsn", "listen_dsn"))
        raise typer.Exit(supervisor.run_processes(processes, args, target_dsn, listen_dsn))

    serve(
        tasks,
        state_src,
        target,
        target_dsn,
        loop_factory=loop_factory,
        maintenance=default_maintenance(
            tasks, queue_metrics=queue_metrics, warn_unserved=warn_unserved
        ),
        concurrency=concurrency,
        poll_max=poll_max,
        lease=lease,
        shutdown_timeout=shutdown_timeout,
        priority_ratio=ratio,
        failures_to_dead=failures_to_dead,
        schema=schema,
        renew_lease=renew_lease,
        heartbeat=heartbeat,
        metrics_port=metrics_port,
        statement_timeout=statement_timeout,
        listen_dsn=listen_dsn,
        synchronous_commit=synchronous_commit,
        middleware=chain,
    )


def load_middleware(specs: list[str]) -> list[Any]:
    """The middleware each ``--middleware MODULE:ATTR`` names, checked before anything
    starts (processes included); one line naming the option for one that is wrong."""
    from venturi import middleware

    chain = []
    for spec in specs:
        try:
            chain.append(middleware.load(spec))
        except VenturiError as exc:
            raise fail(f"--middleware {spec}: {exc}") from None
    return chain


class WorkerSettings(TypedDict, total=False):
    """What ``serve`` passes on to ``venturi.Worker`` (its keyword arguments of the same
    names, checked there)."""

    concurrency: int | None
    poll_max: float
    lease: float
    shutdown_timeout: float
    priority_ratio: int | None
    failures_to_dead: bool
    schema: str
    renew_lease: bool
    heartbeat: float
    metrics_port: int | None
    statement_timeout: float | None
    listen_dsn: str | None
    synchronous_commit: bool
    middleware: list[Any]


def serve(
    tasks: list[Task[Any]],
    state_src: Any,
    target: str,
    target_dsn: str,
    *,
    loop_factory: LoopFactory | None = None,
    maintenance: list[Any] | None = None,
    **settings: Unpack[WorkerSettings],
) -> None:
    """Run one worker process over ``tasks`` until SIGINT/SIGTERM (a second signal stops
    it at once): ``venturi worker`` and ``manage.py venturi worker``. ``loop_factory``
    makes its event loop (``parse_loop``; None: asyncio's own); ``maintenance`` defaults
    to ``default_maintenance(tasks)``."""
    from venturi.runtime.worker import Worker

    beside = default_maintenance(tasks) if maintenance is None else maintenance

    async def go() -> None:
        state = await _build_state(state_src, target)
        w = Worker(state, target_dsn, tasks, maintenance=beside, **settings)
        if w.config.metrics_port is not None:
            _serve_metrics(w.config.metrics_port)
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
                exit_now,
                f"stopped at once; could not release the running jobs within "
                f"{FORCED_EXIT_WITHIN:g}s: they are recovered when their leases expire",
            )

        install_signal_handlers(shutdown, force, w.config.shutdown_timeout)
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
            exit_now(said)

    run(go, loop_factory)
