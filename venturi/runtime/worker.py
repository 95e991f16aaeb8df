"""The worker: the facade an application holds. ``Worker`` takes its knobs (checked once,
into a ``config.WorkerConfig``), learns its kinds (``register``: one ``KindPolicy``
each) and ``run`` holds the connections a run needs around the claim-and-dispatch loop
(``loop``), the heartbeat, the stale-claim recovery (``recovery``), the LISTEN
connection (``listener``) and maintenance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Generic, TypeVar

from venturi import db, sql
from venturi.backoff import DEFAULT_BACKOFF, Backoff
from venturi.errors import ConfigError, ConnectError
from venturi.middleware import Middleware
from venturi.rate import Rate
from venturi.runtime import instruments, maintainer
from venturi.runtime.config import (
    DEFAULT_STATEMENT_TIMEOUT,
    Registration,
    Setting,
    WorkerConfig,
    check_tasks,
    default_concurrency,
    default_identity,
    policies,
)
from venturi.runtime.heartbeat import Heartbeat
from venturi.runtime.listener import Listener
from venturi.runtime.loop import CLOSE_WITHIN, POLL_WITHOUT_LISTENER, Loop
from venturi.runtime.maintainer import MaintenanceTask
from venturi.runtime.presence import Presence
from venturi.tasks import Task
from venturi.threads import DaemonThreads

__all__ = ["DEFAULT_STATEMENT_TIMEOUT", "Worker", "default_concurrency", "default_identity"]

S = TypeVar("S")

log = logging.getLogger("venturi.worker")

# Threads beyond the worker's slots for its plain def handlers (see Worker.run).
HANDLER_SPARE = 32


class Worker(Generic[S]):
    """Claims, runs and settles jobs of its registered kinds until ``run``'s shutdown event.

    Every knob is checked here (``config.WorkerConfig``) and raises ``ConfigError``
    naming it. ``pool_or_dsn`` is an asyncpg Pool (the worker holds one of its
    connections for LISTEN and one for its loop, and the heartbeat takes a third each
    tick: at least three, ``MIN_POOL_SIZE``) or a DSN, from which the worker opens its own small
    pool.

    ``listen_dsn`` is a direct connection to the server for LISTEN alone: with it, the
    main DSN may point at a transaction pooler (PgBouncer), and the worker opens its
    connections without a prepared-statement cache. A main DSN marked
    ``pooler=transaction`` without ``listen_dsn`` does not LISTEN (a pooler does not
    keep a session's notifications): the worker polls, at least every second.

    It runs on the event loop that runs ``run``: ``venturi worker`` picks uvloop where it
    is installed (a dependency on CPython outside Windows); in your own process,
    ``uvloop.run(main())`` (docs/worker.md, "On uvloop").
    """

    def __init__(
        self,
        state: S,
        pool_or_dsn: Any,
        tasks: Iterable[Task[Any]] = (),
        *,
        concurrency: int | None = None,
        poll_max: timedelta | float = 30.0,
        lease: timedelta | float = 900.0,
        shutdown_timeout: timedelta | float = 30.0,
        priority_ratio: int | None = 4,
        claimed_by: str | None = None,
        failures_to_dead: bool = False,
        backoff: Backoff = DEFAULT_BACKOFF,
        schema: str = sql.DEFAULT_SCHEMA,
        maintenance: Iterable[MaintenanceTask] = (),
        renew_lease: bool = False,
        heartbeat: timedelta | float = 1.0,
        metrics: bool = False,
        metrics_port: int | None = None,
        statement_timeout: timedelta | float | None = None,
        listen_dsn: str | None = None,
        middleware: Iterable[Middleware] = (),
        synchronous_commit: bool = True,
    ) -> None:
        self.config = WorkerConfig.build(
            pool_or_dsn,
            concurrency=concurrency,
            poll_max=poll_max,
            lease=lease,
            shutdown_timeout=shutdown_timeout,
            priority_ratio=priority_ratio,
            claimed_by=claimed_by,
            failures_to_dead=failures_to_dead,
            backoff=backoff,
            schema=schema,
            maintenance=maintenance,
            renew_lease=renew_lease,
            heartbeat=heartbeat,
            metrics=metrics,
            metrics_port=metrics_port,
            statement_timeout=statement_timeout,
            listen_dsn=listen_dsn,
            middleware=middleware,
            synchronous_commit=synchronous_commit,
        )
        self._instruments = instruments.Instruments(self.config.metrics)
        self.stats = self._instruments.stats
        self.state = state
        self._registered: dict[str, Registration] = {}
        self._running = False
        # This run's loop (the last run's, once it ended); None before the first run.
        self._loop: Loop | None = None
        for t in check_tasks(tasks, "tasks"):
            self.register(t)

    # The knobs, by their keyword's name; each reads (and writes) the worker's config.
    concurrency: Setting[int] = Setting()
    poll_max: Setting[float] = Setting()
    lease: Setting[float] = Setting()
    shutdown_timeout: Setting[float] = Setting()
    priority_ratio: Setting[int | None] = Setting()
    claimed_by: Setting[str] = Setting()
    failures_to_dead: Setting[bool] = Setting()
    backoff: Setting[Backoff] = Setting()
    schema: Setting[str] = Setting()
    maintenance: Setting[list[MaintenanceTask]] = Setting()
    renew_lease: Setting[bool] = Setting()
    heartbeat: Setting[float] = Setting()
    metrics_port: Setting[int | None] = Setting()
    statement_timeout: Setting[float | None] = Setting()
    synchronous_commit: Setting[bool] = Setting()
    listen_dsn: Setting[str | None] = Setting()
    middleware: Setting[list[Middleware]] = Setting()

    def register(
        self,
        task: Task[Any],
        cap: int | None = None,
        *,
        rate: Rate | None = None,
        renew_lease: bool | None = None,
        global_cap: int | None = None,
    ) -> Worker[S]:
        """Teach the worker a kind; ``cap``, ``rate`` and ``renew_lease`` override the
        task's own for this worker, and so does ``global_cap`` (at most that many jobs
        of the kind claimed across every worker: give every worker the same).

        The registered kinds are exactly the claim filter.
        """
        if self._running:
            raise ConfigError("register tasks before the worker runs")
        reg = Registration.check(task, cap, rate, renew_lease, global_cap)
        self._registered[task.kind] = reg
        return self

    def statement_deadline(self) -> float:
        """The longest any statement of the worker's loop, heartbeat or LISTEN health
        check may take, in seconds (``WorkerConfig.statement_deadline``)."""
        return self.config.statement_deadline()

    @property
    def tasks(self) -> dict[str, Task[Any]]:
        """The registered tasks by kind (a copy)."""
        return {k: r.task for k, r in self._registered.items()}

    @property
    def kinds(self) -> list[str]:
        """The registered kinds, sorted."""
        return sorted(self._registered)

    @property
    def listening(self) -> bool:
        """Is the running loop's LISTEN connection up? (Without it, the loop polls.)"""
        return self._loop is not None and self._loop.listening

    def cancel_handlers(self) -> int:
        """Cancel every handler still running (after a loop that died without draining):
        their claims lapse at lease expiry and are recovered. How many were cancelled."""
        return 0 if self._loop is None else self._loop.inflight.cancel_all()

    def jobs_held(self) -> int:
        """Jobs this worker holds now: running, or waiting for their settlement."""
        return 0 if self._loop is None else self._loop.held()

    def jobs_unsettled(self) -> int:
        """Jobs whose handler ended and whose settlement is not yet written."""
        return 0 if self._loop is None else len(self._loop.completer.unsettled)

    # --- running -------------------------------------------------------------------

    async def run(self, shutdown: asyncio.Event) -> None:
        """Run until ``shutdown`` is set, then drain cooperatively and return.

        Fails fast (``ConnectError``/``SchemaError``) if the database is unreachable or
        the schema is not applied; after that, database errors are retried, never fatal.
        """
        if not self._registered:
            raise ConfigError("tasks: register at least one task before running the worker")
        if self._running:
            raise ConfigError("this worker is already running")
        cfg = self.config
        if cfg.metrics_port is not None:
            # Before the pool and the running flag: a port in use raised OSError after
            # both, leaking the pool and leaving this worker refusing to run again.
            instruments.serve_or_refuse(cfg.metrics_port, "metrics_port")
        pool = cfg.pool if cfg.pool is not None else await open_pool(cfg)
        self._running = True
        # A token of this run's own: ownership of its claims never depends on the
        # identity, which another worker (or a restarted run) may share.
        claimant = db.Claimant(cfg.claimed_by)
        loop = self._loop = Loop(
            cfg, claimant, self.state, policies(self._registered.values(), cfg), self._instruments
        )
        loop.inflight.pool = pool
        # Plain def handlers run on threads of this run's own, a thread for each slot:
        # asyncio's default executor has min(32, cores + 4) threads, fewer than the slots
        # of a worker on a small machine, and the jobs past them waited, claimed and their
        # leases running, for a thread (6 of 12 ran at once on two cores). HANDLER_SPARE
        # more, made only when needed, for handlers that timed out or were cancelled but
        # run on in their threads: with none to spare, the next jobs timed out waiting.
        # Daemon threads, so that one stuck for good does not keep the process from
        # exiting (venturi.threads).
        threads = None
        if any(not p.task.is_async for p in loop.policies.values()):
            size = cfg.concurrency + HANDLER_SPARE
            threads = DaemonThreads(size, "venturi-handler")
            loop.inflight.threads = threads
        watcher = asyncio.create_task(loop.watch(shutdown))
        started, began = False, time.monotonic()
        listen_pool: Any = None
        listener: Listener | None = None
        try:
            if cfg.listen_dsn is not None:
                # The LISTEN session needs a server connection of its own, never a pooler's.
                listen_pool = await db.connect.create_worker_pool(
                    cfg.listen_dsn, min_size=1, max_size=1
                )
            try:
                await db.schema.schema_version(pool, schema=cfg.schema)
            except db.errors.RETRYABLE as exc:
                # The server went away between the pool's connect and this first statement
                # (a restart, a terminated backend): the one-line error of a connect that
                # failed, as the CLI documents, never a traceback.
                raise ConnectError(
                    f"cannot connect: the first statement failed ({db.errors.one_line(exc)})"
                ) from None
            started = True
            listener = await listen(cfg, pool, listen_pool, loop, self._instruments)
            await self._serve(pool, loop, claimant, shutdown)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if listener is not None:
                await listener.close()
            if listen_pool is not None:
                await listen_pool.close()
            if cfg.pool is None:
                await close_pool(pool)
            if threads is not None:
                # A handler still in its thread (cancelled, it runs on) is not waited for,
                # now nor when the process exits.
                threads.shutdown(wait=False)
            self._running = False
            if started:
                log.info(
                    "worker %s stopped after %.0fs: %s",
                    cfg.claimed_by,
                    time.monotonic() - began,
                    instruments.summary(self.stats),
                )

    async def _serve(
        self, pool: Any, loop: Loop, claimant: db.Claimant, shutdown: asyncio.Event
    ) -> None:
        """Announce the run, beat its heartbeat and run maintenance around the loop, until
        it has drained (or, on a bug or a cancelled run, abandoned its jobs)."""
        cfg = self.config
        deadline = cfg.statement_deadline()
        limits = {k: (p.cap, p.global_cap) for k, p in loop.policies.items()}
        presence = Presence(
            cfg.schema, claimant, self.kinds, cfg.concurrency, cfg.heartbeat, limits
        )
        # The heartbeat's tick: a quarter of the shortest renewing lease, so a renewal due
        # at a third of a lease happens before 0.6 of it has passed.
        tick = min([cfg.heartbeat, *(p.lease / 4 for p in loop.policies.values() if p.renew)])
        heartbeat = Heartbeat(
            cfg.schema, claimant, tick, self._instruments, loop.inflight.handles, presence
        )
        await presence.register(pool)
        log.info(
            "worker %s started: kinds=%s concurrency=%d loop=%s id=%s",
            cfg.claimed_by,
            ",".join(self.kinds),
            cfg.concurrency,
            event_loop_name(),
            claimant.token,
        )
        beating = asyncio.create_task(heartbeat.run(db.held.hold(pool, deadline, keep=False)))
        # Beside the loop, not inside its claims: a busy or idle loop recovers alike.
        recovering = asyncio.create_task(
            loop.recovery.run(db.held.hold(pool, deadline, keep=False), loop.look)
        )
        held = db.held.hold(pool, deadline, prepare=db.connect.caches_statements(pool))
        try:
            async with maintainer.running(cfg.maintenance, pool, self):
                try:
                    await loop.run_until(held, shutdown)
                    await loop.drain(held)
                except BaseException:
                    # A bug outside the handlers, or run() itself cancelled: do not
                    # leave the running jobs to lease expiry; release what we can.
                    await loop.abandon(held)
                    raise
        finally:
            for timer in (beating, recovering):
                timer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await timer
            await presence.stop(pool)
            if isinstance(held, db.held.Held):
                await held.close()


def event_loop_name() -> str:
    """The running event loop's implementation, for the start line: ``uvloop`` or
    ``asyncio`` (or the top package of another loop's class)."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


async def open_pool(config: WorkerConfig) -> Any:
    """The worker's own pool, from its DSN: one connection for the loop, one for LISTEN,
    one for maintenance and the heartbeat, and one per slot for handlers'
    ctx.transaction() (opened only when a handler asks); TCP keepalives on each."""
    assert config.dsn is not None
    return await db.connect.create_worker_pool(
        config.dsn,
        min_size=1,
        max_size=3 + config.concurrency,
        pooled=config.listen_dsn is not None,
    )


async def close_pool(pool: Any) -> None:
    """Close the worker's own pool; a connection stuck on a frozen network would hold
    close() for ever, so after ``CLOSE_WITHIN`` it is terminated."""
    try:
        async with asyncio.timeout(CLOSE_WITHIN):
            await pool.close()
    except TimeoutError:
        pool.terminate()


async def listen(
    config: WorkerConfig, pool: Any, listen_pool: Any, loop: Loop, inst: instruments.Instruments
) -> Listener | None:
    """Start LISTEN for the loop, on ``listen_pool`` if given, else on ``pool`` unless
    its DSN points at a transaction pooler (which keeps no session's notifications):
    then None, and the loop polls."""
    if listen_pool is None and config.dsn is not None and db.connect.behind_pooler(config.dsn):
        log.info(
            "no LISTEN: the DSN points at a transaction pooler and no listen_dsn "
            "is given; polling every %.0fs",
            min(config.poll_max, POLL_WITHOUT_LISTENER),
        )
        return None
    listener = Listener(
        listen_pool or pool,
        sql.channel(config.schema),
        loop.on_notify,
        loop.on_listening,
        inst,
        deadline=config.statement_deadline(),
    )
    await listener.start()
    return listener
