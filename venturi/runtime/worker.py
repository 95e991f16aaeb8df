"""The worker: one claim-and-dispatch loop with an in-flight set of at most N handlers.

Each iteration settles what finished, claims (which first recovers expired claims) into
every free slot, and then sleeps until a handler finishes, a notification arrives, the
next scheduled job becomes visible (bounded by ``poll_max``) or shutdown is asked for.
The parts: ``claimer`` (what to claim), ``executor`` (running a handler),
``completer`` (writing settlements), ``recovery``, ``heartbeat``, ``listener``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Generic, TypeVar

from venturi import db, sql, validate
from venturi import maintenance as maintenance_tasks
from venturi.backoff import DEFAULT_BACKOFF, Backoff
from venturi.db.conn import Source
from venturi.errors import ConfigError
from venturi.maintenance import MaintenanceTask
from venturi.middleware import Middleware
from venturi.middleware import check as middleware_check
from venturi.rate import Rate
from venturi.runtime import instruments
from venturi.runtime.claimer import Claimer
from venturi.runtime.completer import Completer
from venturi.runtime.heartbeat import Heartbeat
from venturi.runtime.inflight import InFlight
from venturi.runtime.listener import Listener
from venturi.runtime.presence import Presence
from venturi.runtime.recovery import Recovery
from venturi.runtime.run import Run
from venturi.tasks import Task

S = TypeVar("S")

log = logging.getLogger("venturi.worker")

TRANSIENT, _ERROR_BACKOFF = db.errors.TRANSIENT, db.errors.ERROR_BACKOFF

# With the LISTEN connection down, poll at least this often so pickup stays prompt.
_POLL_WITHOUT_LISTENER = 1.0

# The default statement deadline, and its floor when a short lease caps it.
DEFAULT_STATEMENT_TIMEOUT = 30.0
_MIN_STATEMENT_TIMEOUT = 1.0

# After shutdown, how long an iteration of the loop may take to come back before it is
# cut (normally milliseconds; a statement on a frozen connection never comes back).
_CUT_AFTER = 1.0

# How long stopping waits for maintenance and the pool to let go of their connections
# before it closes them by force (a statement stuck on a frozen connection).
_CLOSE_WITHIN = 2.0


def default_concurrency() -> int:
    """``max(1, min(8, cores // 2))``: a safe floor, not an optimum. Handlers are mostly
    I/O-bound, so cores are a weak guide; measure and set ``concurrency`` for the load."""
    return max(1, min(8, (os.cpu_count() or 1) // 2))


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker(Generic[S]):
    """Claims, runs and settles jobs of its registered kinds until ``run``'s shutdown event.

    Every knob is checked here and raises ``ConfigError`` naming it. ``pool_or_dsn`` is
    an asyncpg Pool (the worker holds one of its connections for LISTEN and one for its
    loop, and the heartbeat takes a third each tick, so give it at least three) or a DSN,
    from which the worker opens its own small pool.

    ``listen_dsn`` is a direct connection to the server for LISTEN alone: with it, the
    main DSN may point at a transaction pooler (PgBouncer), and the worker opens its
    connections without a prepared-statement cache. A main DSN marked
    ``pooler=transaction`` without ``listen_dsn`` does not LISTEN (a pooler does not
    keep a session's notifications): the worker polls, at least every second.
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
    ) -> None:
        self._dsn, self._pool = validate.pool_or_dsn(pool_or_dsn, "pool_or_dsn")
        if listen_dsn is not None:
            validate.non_empty_str(listen_dsn, "listen_dsn")
        self.listen_dsn = listen_dsn
        if concurrency is None:
            concurrency = default_concurrency()
        self.concurrency = validate.integer(concurrency, "concurrency")
        if priority_ratio is not None:
            validate.integer(
                priority_ratio, "priority_ratio", minimum=2, hint=", or None for strict priority"
            )
        if claimed_by is not None:
            validate.non_empty_str(claimed_by, "claimed_by")
        self.failures_to_dead = validate.boolean(failures_to_dead, "failures_to_dead")
        self.backoff = validate.instance(backoff, Backoff, "backoff", "a venturi.Backoff")
        self.renew_lease = validate.boolean(renew_lease, "renew_lease")
        self.heartbeat = validate.seconds(heartbeat, "heartbeat")
        if metrics_port is not None:
            validate.port(metrics_port, "metrics_port")
        validate.boolean(metrics, "metrics")
        self.metrics_port = metrics_port
        self._instruments = instruments.Instruments(metrics or metrics_port is not None)
        self.stats: Counter[str] = self._instruments.stats
        self.state = state
        self.poll_max = validate.seconds(poll_max, "poll_max")
        self.lease = validate.seconds(lease, "lease")
        self.shutdown_timeout = validate.seconds(
            shutdown_timeout, "shutdown_timeout", allow_zero=True
        )
        self.statement_timeout = (
            None
            if statement_timeout is None
            else validate.seconds(statement_timeout, "statement_timeout")
        )
        self.priority_ratio = priority_ratio
        self.claimed_by = claimed_by or default_identity()
        self.schema = sql.validate_schema(schema)
        self.maintenance = maintenance_tasks.check(list(maintenance))
        self.middleware = middleware_check(middleware)
        self._tasks: dict[str, Task[Any]] = {}
        self._caps: dict[str, int | None] = {}
        self._rates: dict[str, Rate | None] = {}
        self._renew: dict[str, bool | None] = {}
        self._global_caps: dict[str, int | None] = {}
        self._running = False
        for t in tasks:
            self.register(t)
        self._wake = asyncio.Event()
        self._listening = False
        # The loop's parts, made afresh by run().
        self._start_parts()

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
        validate.instance(task, Task, "tasks", "declared with @venturi.task")
        if cap is not None:
            validate.integer(cap, "cap")
        if rate is not None:
            validate.instance(rate, Rate, "rate", "a venturi.Rate")
        if renew_lease is not None:
            validate.boolean(renew_lease, "renew_lease")
        if global_cap is not None:
            validate.integer(global_cap, "global_cap")
        self._tasks[task.kind] = task
        self._caps[task.kind] = cap if cap is not None else task.cap
        self._rates[task.kind] = rate if rate is not None else task.rate
        self._renew[task.kind] = renew_lease
        self._global_caps[task.kind] = global_cap if global_cap is not None else task.global_cap
        return self

    def _lease(self, kind: str) -> float:
        """The kind's lease in seconds: the task's own, else the worker's default."""
        return self._tasks[kind].lease or self.lease

    def _renews(self, kind: str) -> bool:
        own = self._renew[kind]
        return own if own is not None else (self._tasks[kind].renew_lease or self.renew_lease)

    def statement_deadline(self) -> float:
        """The longest any statement of the worker's loop, heartbeat or LISTEN health
        check may take, in seconds: ``statement_timeout`` when set; by default 30 s,
        capped at half the worker's ``lease`` (never below 1 s), since a worker that
        cannot reach the database for a lease has lost its claims anyway. (Not a task's
        own shorter lease: one 1 s-lease kind would put a 1 s deadline on every claim.)"""
        if self.statement_timeout is not None:
            return self.statement_timeout
        return max(_MIN_STATEMENT_TIMEOUT, min(DEFAULT_STATEMENT_TIMEOUT, self.lease / 2))

    @property
    def tasks(self) -> dict[str, Task[Any]]:
        """The registered tasks by kind (a copy)."""
        return dict(self._tasks)

    @property
    def kinds(self) -> list[str]:
        """The registered kinds, sorted."""
        return sorted(self._tasks)

    def cancel_handlers(self) -> int:
        """Cancel every handler still running (after a loop that died without draining):
        their claims lapse at lease expiry and are recovered. How many were cancelled."""
        return self._running_now.cancel_all()

    def jobs_held(self) -> int:
        """Jobs this worker holds now: running, or waiting for their settlement."""
        return len(self._inflight) + self.jobs_unsettled()

    def jobs_unsettled(self) -> int:
        """Jobs whose handler ended and whose settlement is not yet written."""
        return len(self._completer.unsettled)

    # --- running -------------------------------------------------------------------

    async def run(self, shutdown: asyncio.Event) -> None:
        """Run until ``shutdown`` is set, then drain cooperatively and return.

        Fails fast (``ConnectError``/``SchemaError``) if the database is unreachable or
        the schema is not applied; after that, database errors are retried, never fatal.
        """
        if not self._tasks:
            raise ConfigError("tasks: register at least one task before running the worker")
        if self._running:
            raise ConfigError("this worker is already running")
        own_pool = self._pool is None
        pool = self._pool
        if pool is None:
            assert self._dsn is not None
            # One connection for the loop, one for LISTEN, one for maintenance and the
            # heartbeat, and one per slot for handlers' ctx.transaction() (opened only
            # when a handler asks); TCP keepalives on each.
            pool = await db.connect.create_worker_pool(
                self._dsn,
                min_size=1,
                max_size=3 + self.concurrency,
                pooled=self.listen_dsn is not None,
            )
        deadline = self.statement_deadline()
        self._running = True
        self._start_parts()
        self._running_now.pool = pool
        if self.metrics_port is not None:
            instruments.serve(self.metrics_port)
        self._wake = asyncio.Event()
        listen_pool: Any = None
        listener: Listener | None = None
        watcher = asyncio.create_task(self._watch(shutdown))
        started, began = False, time.monotonic()
        try:
            if self.listen_dsn is not None:
                # The LISTEN session needs a server connection of its own, never a pooler's.
                listen_pool = await db.connect.create_worker_pool(
                    self.listen_dsn, min_size=1, max_size=1
                )
            await db.schema.schema_version(pool, schema=self.schema)
            started = True
            if listen_pool is not None or not (
                self._dsn is not None and db.connect.behind_pooler(self._dsn)
            ):
                listener = Listener(
                    listen_pool or pool,
                    sql.channel(self.schema),
                    self._on_notify,
                    self._on_listening,
                    self._instruments,
                    deadline=deadline,
                )
                await listener.start()
            else:
                log.info(
                    "no LISTEN: the DSN points at a transaction pooler and no listen_dsn "
                    "is given; polling every %.0fs",
                    min(self.poll_max, _POLL_WITHOUT_LISTENER),
                )
            await self._presence.register(pool)
            log.info(
                "worker %s started: kinds=%s concurrency=%d id=%s",
                self.claimed_by,
                ",".join(self.kinds),
                self.concurrency,
                self._presence.claimant.token,
            )
            beating = asyncio.create_task(
                self._heartbeat.run(db.held.hold(pool, deadline, keep=False))
            )
            held = db.held.hold(pool, deadline, prepare=db.connect.caches_statements(pool))
            try:
                async with maintenance_tasks.running(self.maintenance, pool, self):
                    try:
                        await self._loop_until(held, shutdown)
                        await self._drain(held)
                    except BaseException:
                        # A bug outside the handlers, or run() itself cancelled: do not
                        # leave the running jobs to lease expiry; release what we can.
                        await self._abandon(held)
                        raise
            finally:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating
                await self._presence.stop(pool)
                if isinstance(held, db.held.Held):
                    await held.close()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if listener is not None:
                await listener.close()
            if listen_pool is not None:
                await listen_pool.close()
            if own_pool:
                try:
                    # A connection stuck on a frozen network would hold close() for ever.
                    async with asyncio.timeout(_CLOSE_WITHIN):
                        await pool.close()
                except TimeoutError:
                    pool.terminate()
            self._running = False
            if started:
                log.info(
                    "worker %s stopped after %.0fs: %s",
                    self.claimed_by,
                    time.monotonic() - began,
                    instruments.summary(self.stats),
                )

    def _start_parts(self) -> None:
        """This run's parts, fresh. A token of this run's own: ownership of its claims
        never depends on the identity, which another worker (or a restarted run) may
        share."""
        claimant = db.Claimant(self.claimed_by)
        inst, per_kind = self._instruments, Counter[str]()
        leases = {k: self._lease(k) for k in self._tasks}
        renews = {k: self._renews(k) for k in self._tasks}
        self._running_now = InFlight(
            self.state,
            self._tasks,
            leases,
            renews,
            self._ended,
            inst,
            self.schema,
            claimant,
            self.middleware,
        )
        self._inflight = self._running_now.handles
        self._recovery = Recovery(self.schema, self.claimed_by, self.backoff, self.stats)
        self._claimer = Claimer(
            schema=self.schema,
            claimant=claimant,
            kinds=self._tasks,
            leases=leases,
            caps=self._caps,
            rates=self._rates,
            priority_ratio=self.priority_ratio,
            backoff=self.backoff,
            poll_max=self.poll_max,
            per_kind=per_kind,
            recovery=self._recovery,
            instruments=inst,
            deadline=self.statement_deadline(),
            global_caps={k: n for k, n in self._global_caps.items() if n is not None},
        )
        self._completer = Completer(
            self.schema, claimant, self.backoff, self.failures_to_dead, inst, per_kind
        )
        # The heartbeat's tick: a quarter of the shortest renewing lease, so a renewal due
        # at a third of a lease happens before 0.6 of it has passed.
        tick = min([self.heartbeat, *(leases[k] / 4 for k in self._tasks if renews[k])])
        self._presence = Presence(
            self.schema, claimant, self.kinds, self.concurrency, self.heartbeat
        )
        self._heartbeat = Heartbeat(
            self.schema, claimant, tick, inst, self._inflight, self._presence
        )

    def _ended(self, _handle: asyncio.Task[None]) -> None:
        self._wake.set()

    async def _watch(self, shutdown: asyncio.Event) -> None:
        await shutdown.wait()
        self._wake.set()

    def _on_notify(self, payload: str) -> None:
        if not payload or any(k in self._tasks for k in payload.split(",")):
            self._wake.set()

    def _on_listening(self, up: bool) -> None:
        self._listening = up
        if up:
            # Work may have arrived while we were not listening.
            self._wake.set()

    async def _loop_until(self, conn: Source, shutdown: asyncio.Event) -> None:
        """Run the loop until shutdown. An iteration that has not come back ``_CUT_AFTER``
        seconds after shutdown is waiting on a statement that may never answer (a
        black-holed connection): cut it, so the drain starts now. Its claim may have
        committed with the answer lost: the drain releases such orphans."""
        loop = asyncio.create_task(self._loop(conn, shutdown))
        stop = asyncio.create_task(shutdown.wait())
        try:
            await asyncio.wait([loop, stop], return_when=asyncio.FIRST_COMPLETED)
            if not loop.done():
                await asyncio.wait([loop], timeout=_CUT_AFTER)
            if not loop.done():
                log.warning(
                    "stopping: the worker loop is waiting on the database; abandoning "
                    "that statement to drain now"
                )
                loop.cancel()
                await asyncio.wait([loop])
                self._completer.orphans_possible = True
                return
            loop.result()  # a bug in the loop: raised, and the run abandons its jobs
        finally:
            stop.cancel()
            if not loop.done():  # run() itself cancelled
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop

    async def _loop(self, conn: Source, shutdown: asyncio.Event) -> None:
        errors = 0
        claimer, completer, recovery = self._claimer, self._completer, self._recovery
        while not shutdown.is_set():
            # Cleared before the work, so that anything arriving meanwhile (a finished
            # handler, a notification) makes the wait below return at once.
            self._wake.clear()
            timeout = self.poll_max
            try:
                self._reap()
                if completer.isolate:
                    await completer.settle(conn, isolate=True)
                    completer.isolate = False
                if completer.orphans_possible:
                    running = [r.id for r in self._inflight.values()]
                    await completer.release_orphans(
                        conn, running + [r.id for r in completer.unsettled]
                    )
                    completer.orphans_possible = False
                await completer.settle(conn, completes=False)
                completes = completer.completes()
                # Completions ride the next claim: their slots count as free already.
                busy = len(self._inflight) + len(completer.unsettled) - len(completes)
                free = self.concurrency - busy
                if free > 0:
                    short = await self._fill(conn, free, shutdown, completes)
                    token_wait = claimer.token_wait()
                    if short:
                        # Idle slots: wake exactly when the next scheduled job is due.
                        timeout = await claimer.until_next_visible(conn)
                        if token_wait is not None:
                            timeout = min(timeout, token_wait)
                    elif not claimer.claimable_kinds():
                        # Every kind at its cap (only a finish helps) or out of tokens.
                        if token_wait is not None:
                            timeout = min(timeout, token_wait)
                    else:
                        timeout = 0.0  # slots remain and the queue had more: go again
                else:
                    await completer.settle(conn)  # all slots busy: only a finish helps
                # With every slot busy or every kind at its cap no claim runs, and so no
                # recovery inside one: recover on their own, every poll_max, so a dead
                # worker's expired claims do not wait for this worker to have room.
                if time.monotonic() - recovery.at >= self.poll_max:
                    await recovery.recover(conn)
                timeout = min(timeout, recovery.at + self.poll_max - time.monotonic())
                errors = 0
            except TRANSIENT as exc:
                errors += 1
                delay = _ERROR_BACKOFF.delay(errors)
                self._instruments.db_error()
                # A claim that failed may have committed with its answer lost: its jobs
                # are claimed by us and run by no one. Look for them once we are back.
                completer.orphans_possible = True
                if not isinstance(exc, db.errors.RETRYABLE) and completer.unsettled:
                    # Possibly one outcome the database refuses: settle the queue one
                    # run at a time next, so a poisoned write cannot wedge the rest.
                    completer.isolate = True
                log.warning(
                    "database error in the worker loop (retrying in %.2fs): %s",
                    delay,
                    db.errors.one_line(exc),
                )
                timeout = delay
            if not self._listening:
                timeout = min(timeout, _POLL_WITHOUT_LISTENER)
            if completer.unsettled:
                timeout = min(timeout, _ERROR_BACKOFF.delay(max(errors, 1)))
            timeout = max(timeout, 0.0)
            if timeout == 0.0 and not shutdown.is_set():
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def _fill(
        self, conn: Source, free: int, shutdown: asyncio.Event, done: list[Run]
    ) -> bool:
        """Settle ``done`` and claim into the free slots; True when the queue had nothing
        more to give."""
        claimer = self._claimer
        free, short, unsent = await claimer.fill(
            conn, free, shutdown, done, self._completer.completed, self._running_now.start
        )
        if unsent:
            await self._completer.settle(conn)
        if claimer.shared and free > 0 and not shutdown.is_set():
            free -= await claimer.fill_shared(conn, free, self._running_now.start)
            # Slots left over: wait for the next scheduled job or the next token.
            short = short or free > 0
        if claimer.global_caps and free > 0 and not shutdown.is_set():
            free -= await claimer.fill_capped(conn, free, self._running_now.start)
            short = short or free > 0
        return short

    def _reap(self) -> None:
        """Move finished handlers from the in-flight set to the settle queue."""
        self._completer.reap(self._inflight)

    # --- shutdown ------------------------------------------------------------------

    async def _abandon(self, conn: Source) -> None:
        """Cancel every handler and settle or release its job, within a few seconds."""
        why = "worker stopped at once; handler cancelled"
        await self._running_now.stop(why, self._reap, self._completer.queue)
        try:
            async with asyncio.timeout(5):
                await self._completer.settle(conn)
        except Exception as exc:  # the jobs left fall to lease expiry
            log.warning("could not settle or release jobs while stopping: %s", exc)

    async def _drain(self, conn: Source) -> None:
        """Graceful shutdown: no more claims; ask handlers to stop (their contexts'
        ``cancelled`` is set), wait up to ``shutdown_timeout`` settling each as it
        finishes; then cancel the rest and release their jobs, which are not failures."""
        self._running_now.ask_to_stop()
        deadline = time.monotonic() + self.shutdown_timeout
        while self._inflight:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait(
                list(self._inflight), timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            self._reap()
            with contextlib.suppress(*TRANSIENT):
                await self._completer.settle(conn)
        if self._inflight:
            log.warning(
                "shutdown_timeout (%.1fs) elapsed: cancelling %d handler(s) and releasing their jobs",
                self.shutdown_timeout,
                len(self._inflight),
            )
            why = "shutdown_timeout elapsed; handler cancelled"
            await self._running_now.stop(why, self._reap, self._completer.queue)
        # Settle what is left, and release any job a cut claim took; if the database
        # stays away, lease expiry recovers them. Bounded: each statement by its
        # deadline, the whole by two of them.
        completer = self._completer
        deadline = self.statement_deadline()
        try:
            async with asyncio.timeout(2 * deadline + 1):
                for attempt in range(1, 6):
                    try:
                        await completer.settle(conn)
                        break
                    except TRANSIENT as exc:
                        log.warning(
                            "settling at shutdown failed (%s); retrying", db.errors.one_line(exc)
                        )
                        await asyncio.sleep(_ERROR_BACKOFF.delay(attempt))
        except TimeoutError:
            log.warning(
                "could not settle %d job(s) while stopping: the database does not answer; "
                "their leases expire and they are recovered",
                len(completer.unsettled),
            )
        if completer.orphans_possible:
            # Best effort, briefly: lease expiry recovers them too.
            with contextlib.suppress(*TRANSIENT):
                async with asyncio.timeout(min(deadline, _CLOSE_WITHIN)):
                    await completer.release_orphans(conn, [r.id for r in completer.unsettled])
                    completer.orphans_possible = False
