"""The worker: one claim-and-dispatch loop with an in-flight set of at most N handlers.

Each iteration settles what finished, claims (which first recovers expired claims) into
every free slot, and then sleeps until a handler finishes, a notification arrives, the
next scheduled job becomes visible (bounded by ``poll_max``) or shutdown is asked for.
The design document ``venturi-worker-runtime-model`` decides every behaviour here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

import msgspec

from venturi import db, sql
from venturi import maintenance as maintenance_tasks
from venturi import metrics as metrics_mod
from venturi.backoff import DEFAULT_BACKOFF, Backoff, seconds
from venturi.codecs import encode_any, text_safe
from venturi.context import Context, JobMeta
from venturi.errors import ConfigError
from venturi.maintenance import MaintenanceTask
from venturi.outcomes import Complete, Dead, Pause, Retry
from venturi.priority import Priority
from venturi.rate import Rate, TokenBucket
from venturi.registry import Task

S = TypeVar("S")

log = logging.getLogger("venturi.worker")
_recovery_log = logging.getLogger("venturi.recovery")

TRANSIENT = db.errors.TRANSIENT
_RETRYABLE = db.errors.RETRYABLE

# How long the loop sleeps between attempts after a database error: doubling, capped.
_ERROR_BACKOFF = Backoff.exponential(0.1, 2.0, 5.0, jitter=True)

# With the LISTEN connection down, poll at least this often so pickup stays prompt.
_POLL_WITHOUT_LISTENER = 1.0

# How long a handler the worker cancelled gets to finish its clean-up before the worker
# releases its job and stops waiting for it (it runs on, unobserved, in the background):
# without a bound, one handler that is slow to stop would hold shutdown indefinitely.
CANCEL_GRACE = 5.0


def default_concurrency() -> int:
    """``max(1, min(8, cores // 2))``: a safe floor, not an optimum (ADR 20)."""
    return max(1, min(8, (os.cpu_count() or 1) // 2))


def _log_recovered_by_claim(rows: list[Any]) -> None:
    for r in rows:
        _recovery_log.warning(
            "recovered job %d (%s): its lease expired; worker %s presumed dead (failure %d of %d)",
            r["id"],
            r["kind"],
            r["recovered_from"],
            r["failures"],
            r["max_failures"],
            extra={"job_id": r["id"], "kind": r["kind"], "attempt": r["attempt"]},
        )


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(eq=False)
class _Run:
    """One claimed job while its handler runs and until it is settled."""

    task: Task[Any]
    id: int
    attempt: int
    failures: int
    carry_text: str
    priority: int
    created_at: datetime
    lease: float = 0.0
    renew: bool = False
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)
    # An operator asked to cancel this job (cancel_requested_at, seen by the heartbeat).
    cancel_requested: bool = False
    # Set, to the reason, before the worker cancels the handler's task: only such a
    # cancellation is a release; a CancelledError the handler raises on its own is a
    # failure like any other exception.
    stopped: str | None = None
    # Filled when the handler ends: (kind of settle, payload).
    outcome: tuple[str, Any] | None = None


def _is_complete(run: _Run) -> bool:
    return run.outcome is not None and run.outcome[0] == "complete"


def _result(run: _Run) -> str | None:
    return run.outcome[1] if run.outcome is not None else None


class Worker(Generic[S]):
    """Claims, runs and settles jobs of its registered kinds until ``run``'s shutdown event.

    Every knob is checked here and raises ``ConfigError`` naming it. ``pool_or_dsn`` is
    an asyncpg Pool (the worker holds one of its connections for LISTEN, so give it at
    least two) or a DSN, from which the worker opens its own small pool.
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
    ) -> None:
        if isinstance(pool_or_dsn, str):
            if not pool_or_dsn.strip():
                raise ConfigError("pool_or_dsn must be an asyncpg Pool or a non-empty DSN")
            self._dsn: str | None = pool_or_dsn
            self._pool: Any = None
        elif all(hasattr(pool_or_dsn, m) for m in ("acquire", "release", "fetch")):
            self._dsn = None
            self._pool = pool_or_dsn
        else:
            raise ConfigError(f"pool_or_dsn must be an asyncpg Pool or a DSN, got {pool_or_dsn!r}")
        if concurrency is None:
            concurrency = default_concurrency()
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        if priority_ratio is not None and (
            isinstance(priority_ratio, bool)
            or not isinstance(priority_ratio, int)
            or priority_ratio < 2
        ):
            raise ConfigError(
                f"priority_ratio must be an integer >= 2, or None for strict priority, "
                f"got {priority_ratio!r}"
            )
        if claimed_by is not None and (not isinstance(claimed_by, str) or not claimed_by):
            raise ConfigError(f"claimed_by must be a non-empty string, got {claimed_by!r}")
        if not isinstance(failures_to_dead, bool):
            raise ConfigError(f"failures_to_dead must be a bool, got {failures_to_dead!r}")
        if not isinstance(backoff, Backoff):
            raise ConfigError(f"backoff must be a venturi.Backoff, got {backoff!r}")
        if not isinstance(renew_lease, bool):
            raise ConfigError(f"renew_lease must be a bool, got {renew_lease!r}")
        self.renew_lease = renew_lease
        self.heartbeat = seconds(heartbeat, "heartbeat")
        if metrics_port is not None and (
            isinstance(metrics_port, bool)
            or not isinstance(metrics_port, int)
            or not 0 < metrics_port < 65536
        ):
            raise ConfigError(f"metrics_port must be a TCP port (1-65535), got {metrics_port!r}")
        if not isinstance(metrics, bool):
            raise ConfigError(f"metrics must be a bool, got {metrics!r}")
        self.metrics_port = metrics_port
        self._m = metrics_mod.get() if (metrics or metrics_port is not None) else None
        self.state = state
        self.concurrency = concurrency
        self.poll_max = seconds(poll_max, "poll_max")
        self.lease = seconds(lease, "lease")
        self.shutdown_timeout = seconds(shutdown_timeout, "shutdown_timeout", allow_zero=True)
        self.priority_ratio = priority_ratio
        self.claimed_by = claimed_by or default_identity()
        self.failures_to_dead = failures_to_dead
        self.backoff = backoff
        self.schema = sql.validate_schema(schema)
        self.maintenance = maintenance_tasks.check(list(maintenance))
        self._tasks: dict[str, Task[Any]] = {}
        self._caps: dict[str, int | None] = {}
        self._rates: dict[str, Rate | None] = {}
        self._renew: dict[str, bool | None] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._running = False
        self.stats: Counter[str] = Counter()
        for t in tasks:
            self.register(t)
        # Loop state, reset by run().
        self._inflight: dict[asyncio.Task[None], _Run] = {}
        self._per_kind: Counter[str] = Counter()
        self._unsettled: list[_Run] = []
        self._wake = asyncio.Event()
        self._claims = 0
        self._listening = False
        self._isolate = False
        self._orphans_possible = False
        # When a statement last recovered expired claims (monotonic seconds).
        self._recovered_at = 0.0
        # Lookups in a row that found a job due which the claim before did not take.
        self._due_again = 0
        self._claimant = db.Claimant(self.claimed_by)

    def register(
        self,
        task: Task[Any],
        cap: int | None = None,
        *,
        rate: Rate | None = None,
        renew_lease: bool | None = None,
    ) -> Worker[S]:
        """Teach the worker a kind; ``cap``, ``rate`` and ``renew_lease`` override the
        task's own for this worker.

        The registered kinds are exactly the claim filter.
        """
        if self._running:
            raise ConfigError("register tasks before the worker runs")
        if not isinstance(task, Task):
            raise ConfigError(f"tasks must be declared with @venturi.task, got {task!r}")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigError(f"cap must be an integer >= 1, got {cap!r}")
        if rate is not None and not isinstance(rate, Rate):
            raise ConfigError(f"rate must be a venturi.Rate, got {rate!r}")
        if renew_lease is not None and not isinstance(renew_lease, bool):
            raise ConfigError(f"renew_lease must be a bool, got {renew_lease!r}")
        self._tasks[task.kind] = task
        self._caps[task.kind] = cap if cap is not None else task.cap
        self._rates[task.kind] = rate if rate is not None else task.rate
        self._renew[task.kind] = renew_lease
        return self

    def _lease(self, kind: str) -> float:
        """The kind's lease in seconds: the task's own, else the worker's default."""
        return self._tasks[kind].lease or self.lease

    def _renews(self, kind: str) -> bool:
        own = self._renew[kind]
        return own if own is not None else (self._tasks[kind].renew_lease or self.renew_lease)

    @property
    def tasks(self) -> dict[str, Task[Any]]:
        """The registered tasks by kind (a copy)."""
        return dict(self._tasks)

    @property
    def kinds(self) -> list[str]:
        """The registered kinds, sorted."""
        return sorted(self._tasks)

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
            # One connection for the loop, one for LISTEN, one for maintenance.
            pool = await db.connect.create_pool(self._dsn, min_size=1, max_size=3)
        self._running = True
        # A token of this run's own: ownership of its claims never depends on the
        # identity, which another worker (or a restarted run) may share.
        self._claimant = db.Claimant(self.claimed_by)
        self._inflight, self._per_kind, self._unsettled = {}, Counter(), []
        self._buckets = {
            k: TokenBucket(r) for k, r in self._rates.items() if r is not None and not r.shared
        }
        # Kinds with a shared (database) bucket are claimed on their own, each in a
        # transaction with its bucket; until = when an empty bucket has its next token.
        self._shared = {k: r for k, r in self._rates.items() if r is not None and r.shared}
        self._shared_until: dict[str, float] = {}
        if self.metrics_port is not None:
            metrics_mod.serve(self.metrics_port)
        self._wake = asyncio.Event()
        listener = _Listener(self, pool)
        watcher = asyncio.create_task(self._watch(shutdown))
        started = False
        try:
            await db.schema.schema_version(pool, schema=self.schema)
            started = True
            await listener.start()
            log.info(
                "worker %s started: kinds=%s concurrency=%d",
                self.claimed_by,
                ",".join(self.kinds),
                self.concurrency,
            )
            beating = asyncio.create_task(self._heartbeat_loop(pool))
            # The loop's statements are sequential: they go through one held connection
            # (a pool's acquire and release cost a reset round trip per statement).
            held = db.held.hold(pool)
            try:
                async with maintenance_tasks.running(self.maintenance, pool, self):
                    try:
                        await self._loop(held, shutdown)
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
                if isinstance(held, db.held.Held):
                    await held.close()
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await listener.close()
            if own_pool:
                await pool.close()
            self._running = False
            if started:
                log.info("worker %s stopped: %s", self.claimed_by, dict(self.stats))

    async def _watch(self, shutdown: asyncio.Event) -> None:
        await shutdown.wait()
        self._wake.set()

    def _on_notify(self, payload: str) -> None:
        if not payload or any(k in self._tasks for k in payload.split(",")):
            self._wake.set()

    async def _loop(self, pool: Any, shutdown: asyncio.Event) -> None:
        errors = 0
        while not shutdown.is_set():
            # Cleared before the work, so that anything arriving meanwhile (a finished
            # handler, a notification) makes the wait below return at once.
            self._wake.clear()
            timeout = self.poll_max
            try:
                self._reap()
                if self._isolate:
                    await self._settle(pool, isolate=True)
                    self._isolate = False
                if self._orphans_possible:
                    await self._release_orphans(pool)
                    self._orphans_possible = False
                await self._settle(pool, completes=False)
                completes = [r for r in self._unsettled if _is_complete(r)]
                # Completions ride the next claim: their slots count as free already.
                busy = len(self._inflight) + len(self._unsettled) - len(completes)
                free = self.concurrency - busy
                if free > 0:
                    short = await self._fill(pool, free, shutdown, completes)
                    token_wait = self._token_wait()
                    if short:
                        # Idle slots: wake exactly when the next scheduled job is due.
                        timeout = await self._until_next_visible(pool)
                        if token_wait is not None:
                            timeout = min(timeout, token_wait)
                    elif not self._claimable_kinds():
                        # Every kind at its cap (only a finish helps) or out of tokens.
                        if token_wait is not None:
                            timeout = min(timeout, token_wait)
                    else:
                        timeout = 0.0  # slots remain and the queue had more: go again
                else:
                    await self._settle(pool)  # all slots busy: only a finishing handler helps
                # With every slot busy or every kind at its cap no claim runs, and so no
                # recovery inside one: recover on their own, every poll_max, so a dead
                # worker's expired claims do not wait for this worker to have room.
                if time.monotonic() - self._recovered_at >= self.poll_max:
                    await self._recover(pool)
                timeout = min(timeout, self._recovered_at + self.poll_max - time.monotonic())
                errors = 0
            except TRANSIENT as exc:
                errors += 1
                delay = _ERROR_BACKOFF.delay(errors)
                self.stats["db_errors"] += 1
                # A claim that failed may have committed with its answer lost: its jobs
                # are claimed by us and run by no one. Look for them once we are back.
                self._orphans_possible = True
                if not isinstance(exc, _RETRYABLE) and self._unsettled:
                    # Possibly one outcome the database refuses: settle the queue one
                    # run at a time next, so a poisoned write cannot wedge the rest.
                    self._isolate = True
                if self._m:
                    self._m.db_errors.inc()
                log.warning(
                    "database error in the worker loop (retrying in %.2fs): %s",
                    delay,
                    db.errors.one_line(exc),
                )
                timeout = delay
            if not self._listening:
                timeout = min(timeout, _POLL_WITHOUT_LISTENER)
            if self._unsettled:
                timeout = min(timeout, _ERROR_BACKOFF.delay(max(errors, 1)))
            timeout = max(timeout, 0.0)
            if timeout == 0.0 and not shutdown.is_set():
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def _until_next_visible(self, pool: Any) -> float:
        """Seconds until the next job the worker could claim now becomes visible, at
        most ``poll_max``; 0 when one is already due.

        The claim read now() when it began: a job whose ``visible_at`` passed since is
        due yet was not claimed, so the lookup keeps due jobs and the loop claims again.
        It asks only about kinds a claim would take now, else a due job of a kind at its
        cap or out of tokens would keep the loop claiming in vain.
        """
        kinds = self._claimable_kinds() + self._shared_claimable(time.monotonic())
        if not kinds:
            return self.poll_max
        nxt = await db.jobs.job_next_visible_at(pool, schema=self.schema, kinds=sorted(kinds))
        due = self.poll_max if nxt is None else (nxt - datetime.now(nxt.tzinfo)).total_seconds()
        if due > 0:
            self._due_again = 0
            return min(self.poll_max, due)
        # Due now: claim again at once. A due job the claims keep skipping is a row
        # locked by someone else (a claim in progress, an open transaction): back off,
        # doubling, rather than spin for as long as the lock is held.
        self._due_again += 1
        if self._due_again == 1:
            return 0.0
        return min(self.poll_max, _ERROR_BACKOFF.delay(self._due_again - 1))

    async def _recover(self, pool: Any) -> None:
        """Recover expired claims (of any worker) without claiming."""
        self._recovered_at = time.monotonic()
        for row in await db.jobs.job_recover_stale(
            pool, schema=self.schema, recoverer=self.claimed_by, backoff=self.backoff
        ):
            self.stats["recovered"] += 1
            _recovery_log.warning(
                "recovered job %d (%s): its lease expired; worker %s presumed dead (now %s)",
                row["id"],
                row["kind"],
                row["claimed_by"] or "?",
                row["status"],
                extra={"job_id": row["id"], "kind": row["kind"], "attempt": row["attempt"]},
            )

    # --- claiming ------------------------------------------------------------------

    def _claimable_kinds(self, releasing: Counter[str] | None = None) -> list[str]:
        """Registered kinds under their cap, counting ``releasing`` runs as finished."""
        rel = releasing or Counter()
        return [
            k
            for k in self.kinds
            if ((cap := self._caps[k]) is None or self._per_kind[k] - rel[k] < cap)
            and ((bucket := self._buckets.get(k)) is None or bucket.available() >= 1)
            and k not in self._shared
        ]

    def _shared_claimable(self, now: float) -> list[str]:
        return [
            k
            for k in self._shared
            if ((cap := self._caps[k]) is None or self._per_kind[k] < cap)
            and self._shared_until.get(k, 0.0) <= now
        ]

    def _token_wait(self) -> float | None:
        """Seconds until a kind held back only by its rate limit gets a token."""
        waits = [b.wait() for b in self._buckets.values() if b.available() < 1]
        now = time.monotonic()
        waits += [max(0.0, t - now) for t in self._shared_until.values() if t > now]
        return min(waits) if waits else None

    def _next_floor(self) -> int:
        """The priority floor of the next claim: weighted anti-starvation (ADR 22).

        Every ``ratio``-th claim is reserved for NORMAL and LOW, every ``ratio**2``-th
        for LOW, so each tier keeps a share while higher tiers get about ``ratio`` times
        more. None means strict priority.
        """
        self._claims += 1
        r = self.priority_ratio
        if r is None:
            return Priority.HIGH
        if self._claims % (r * r) == 0:
            return Priority.LOW
        if self._claims % r == 0:
            return Priority.NORMAL
        return Priority.HIGH

    async def _fill(
        self, pool: Any, free: int, shutdown: asyncio.Event, completes: list[_Run]
    ) -> bool:
        """Settle ``completes`` and claim into the free slots, in as few statements as
        possible; True when the queue had nothing more to give."""
        done = completes
        short = False
        while free > 0 and not shutdown.is_set():
            releasing = Counter(r.task.kind for r in done)
            kinds = self._claimable_kinds(releasing)
            if not kinds:
                break
            limit = free
            for k in kinds:
                cap = self._caps[k]
                if cap is not None:
                    # A batch must not overshoot a cap: size it to the tightest room.
                    limit = min(limit, cap - (self._per_kind[k] - releasing[k]))
                if (bucket := self._buckets.get(k)) is not None:
                    # Nor spend more tokens than the bucket holds.
                    limit = min(limit, bucket.available())
            leases = [self._lease(k) for k in kinds]
            floor = self._next_floor()
            self._recovered_at = time.monotonic()  # every claim recovers first
            rows, settled, recovered = await db.jobs.job_claim(
                pool,
                schema=self.schema,
                claimant=self._claimant,
                kinds=kinds,
                leases=leases,
                floor=floor,
                limit=limit,
                backoff=self.backoff,
                done=[(r.id, r.attempt, _result(r)) for r in done],
            )
            if recovered:
                _log_recovered_by_claim(recovered)
            for r in done:
                self._finish(r, "completed", r.id in settled)
            done = []
            if floor and len(rows) < limit:
                # A reserved tier that is empty does not waste the slot.
                more, _, recovered = await db.jobs.job_claim(
                    pool,
                    schema=self.schema,
                    claimant=self._claimant,
                    kinds=kinds,
                    leases=leases,
                    floor=0,
                    limit=limit - len(rows),
                    backoff=self.backoff,
                )
                if recovered:
                    _log_recovered_by_claim(recovered)
                rows += more
            self._start(rows)
            free -= len(rows)
            if len(rows) < limit:
                short = True
                break
        if done:
            await self._settle(pool)
        if self._shared and free > 0 and not shutdown.is_set():
            free -= await self._fill_shared(pool, free)
            # Slots left over: wait for the next scheduled job or the next token.
            short = short or free > 0
        return short

    async def _fill_shared(self, pool: Any, free: int) -> int:
        """Claim kinds with a shared rate limit, each within its database bucket."""
        taken = 0
        for kind in self._shared_claimable(time.monotonic()):
            room = free - taken
            cap = self._caps[kind]
            if cap is not None:
                room = min(room, cap - self._per_kind[kind])
            if room < 1:
                continue
            rate = self._shared[kind]
            (rows, _, recovered), wait = await db.rates.claim_within_rate(
                pool,
                schema=self.schema,
                claimant=self._claimant,
                kind=kind,
                lease=self._lease(kind),
                per_second=rate.per_second,
                burst=rate.burst,
                wanted=room,
                backoff=self.backoff,
            )
            if recovered:
                _log_recovered_by_claim(recovered)
            if wait:
                self._shared_until[kind] = time.monotonic() + wait
            else:
                self._shared_until.pop(kind, None)
            self._start(rows)
            taken += len(rows)
        return taken

    def _start(self, rows: list[Any]) -> None:
        """Start a claim's jobs at once and count the claim."""
        for row in rows:
            self._spawn(row)
            if (bucket := self._buckets.get(row["kind"])) is not None:
                bucket.spend(1)
        self.stats["claimed"] += len(rows)
        if rows:
            self._due_again = 0
        else:
            self.stats["empty_claims"] += 1
        if self._m:
            self._m.claims.inc()
            if not rows:
                self._m.empty_claims.inc()
            for row in rows:
                self._m.claimed.labels(row["kind"]).inc()
                self._m.pickup_seconds.labels(row["kind"]).observe(max(0.0, row["waited"]))

    def _spawn(self, row: Any) -> None:
        kind = row["kind"]
        run = _Run(
            task=self._tasks[kind],
            id=row["id"],
            attempt=row["attempt"],
            failures=row["failures"],
            carry_text=row["carry"],
            priority=row["priority"],
            created_at=row["created_at"],
            lease=self._lease(kind),
            renew=self._renews(kind),
        )
        handle = asyncio.create_task(self._execute(run), name=f"venturi job {run.id}")
        handle.add_done_callback(lambda _: self._wake.set())
        self._inflight[handle] = run
        self._per_kind[kind] += 1
        if self._m:
            self._m.in_flight.labels(kind).inc()

    # --- running one handler -------------------------------------------------------

    async def _execute(self, run: _Run) -> None:
        """Run one handler and record its outcome on ``run``; never raises but for a
        cancellation by the worker (``run.stopped``), which the loop turns into a release."""
        task = run.task
        try:
            carry = task.codec.decode(run.carry_text)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            run.outcome = (
                "undecodable",
                f"carry no longer decodes as {task.codec.carry_type!r}: {exc}",
            )
            return
        meta = JobMeta(
            run.id, task.kind, Priority(run.priority), run.attempt, run.failures, run.created_at
        )
        ctx: Context[Any] = Context(self.state, meta, run.cancel)
        deadline = None
        try:
            if task.timeout is None:
                # No timeout context on the common path: it costs a timer per job.
                result = await self._call(task, ctx, carry)
            else:
                async with asyncio.timeout(task.timeout) as deadline:
                    result = await self._call(task, ctx, carry)
        except TimeoutError:
            if deadline is not None and deadline.expired():
                run.outcome = ("timed-out", f"run exceeded its timeout of {task.timeout}s")
            else:
                run.outcome = ("failed", traceback.format_exc())
            return
        except asyncio.CancelledError:
            if run.stopped is not None:
                raise  # the worker's own cancellation: the loop releases the job
            # The handler awaited something other code cancelled: nothing told it to
            # stop, so it failed, and it must count toward its backstop; a release here
            # would claim and run it again at once, forever.
            run.outcome = (
                "failed",
                "the handler raised CancelledError; the worker did not cancel it\n"
                + traceback.format_exc(),
            )
            return
        except Exception:
            run.outcome = ("failed", traceback.format_exc())
            return
        run.outcome = self._check_outcome(run, result)

    @staticmethod
    async def _call(task: Task[Any], ctx: Context[Any], carry: Any) -> Any:
        if task.is_async:
            return await task.fn(ctx, carry)  # type: ignore[misc]
        # A plain def handler runs in a thread: blocking-aware spawn.
        result = await asyncio.to_thread(task.fn, ctx, carry)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    def _check_outcome(self, run: _Run, result: Any) -> tuple[str, Any]:
        task = run.task
        if result is None:
            result = Complete()
        try:
            if isinstance(result, Complete):
                return (
                    "complete",
                    None if result.result is None else encode_any(result.result, "result"),
                )
            if isinstance(result, Pause):
                return ("pause", (task.codec.encode(result.carry), result.at, result.after))
            if isinstance(result, Retry):
                carry = task.codec.encode(result.carry) if result.has_carry else None
                return ("retry", (carry, result.after, result.reason))
            if isinstance(result, Dead):
                return ("dead", result.reason)
        except (TypeError, ValueError) as exc:
            return ("failed", f"handler returned an outcome that cannot be stored: {exc}")
        return (
            "failed",
            f"handler returned {type(result).__name__} {result!r:.200}, not an outcome: "
            "return venturi.complete(), pause(), retry(), dead() or None",
        )

    # --- settling ------------------------------------------------------------------

    def _reap(self) -> None:
        """Move finished handlers from the in-flight set to the settle queue."""
        for handle in [h for h in self._inflight if h.done()]:
            run = self._inflight.pop(handle)
            if self._m:
                self._m.run_seconds.labels(run.task.kind).observe(time.monotonic() - run.started)
            if handle.cancelled():
                if run.stopped is not None:
                    run.outcome = ("release", run.stopped)
                else:
                    run.outcome = ("failed", "the handler's task was cancelled, not by the worker")
            elif (exc := handle.exception()) is not None:
                run.outcome = ("failed", "".join(traceback.format_exception(exc)))
            elif run.outcome is None:
                run.outcome = ("failed", "handler ended without an outcome")
            self._unsettled.append(run)

    async def _settle(self, pool: Any, completes: bool = True, isolate: bool = False) -> None:
        """Write queued outcomes (completions too, unless ``completes`` is False because
        they will ride the next claim). A run leaves the queue, freeing its slot, only
        once its settlement is written or found to have lost its claim. ``isolate``
        settles one run per statement, turning a write the database refuses into a
        failed execution instead of an error that would repeat forever."""
        if not self._unsettled:
            return
        if isolate:
            for run in list(self._unsettled):
                await self._settle_isolated(pool, run)
            return
        done = [r for r in self._unsettled if _is_complete(r)] if completes else []
        if done:
            settled = await db.jobs.job_complete_many_if_owned(
                pool,
                schema=self.schema,
                claimant=self._claimant,
                ids=[r.id for r in done],
                attempts=[r.attempt for r in done],
                results=[_result(r) for r in done],
            )
            for r in done:
                self._finish(r, "completed", r.id in settled)
        for run in [r for r in self._unsettled if not _is_complete(r)]:
            ok = await self._settle_one(pool, run)
            self._finish(run, run.outcome[0] if run.outcome else "?", ok)

    def _finish(self, run: _Run, what: str, applied: bool) -> None:
        self._unsettled.remove(run)
        self._per_kind[run.task.kind] -= 1
        if self._m:
            self._m.in_flight.labels(run.task.kind).dec()
            if applied:
                self._m.settled.labels(run.task.kind, what).inc()
            else:
                self._m.ownership_lost.labels(run.task.kind).inc()
        extra = {"job_id": run.id, "kind": run.task.kind, "attempt": run.attempt}
        if applied:
            self.stats[what] += 1
            log.debug("settled job %d (%s) as %s", run.id, run.task.kind, what, extra=extra)
        else:
            self.stats["ownership_lost"] += 1
            log.warning(
                "skipped settling job %d (%s) as %s: this worker no longer holds its claim "
                "(it was recovered or reclaimed)",
                run.id,
                run.task.kind,
                what,
                extra=extra,
            )

    async def _settle_isolated(self, pool: Any, run: _Run) -> None:
        try:
            if _is_complete(run):
                settled = await db.jobs.job_complete_many_if_owned(
                    pool,
                    schema=self.schema,
                    claimant=self._claimant,
                    ids=[run.id],
                    attempts=[run.attempt],
                    results=[_result(run)],
                )
                self._finish(run, "completed", run.id in settled)
            else:
                ok = await self._settle_one(pool, run)
                self._finish(run, run.outcome[0] if run.outcome else "?", ok)
            return
        except _RETRYABLE:
            raise
        except db.errors.STATEMENT_ERROR as exc:
            refused = f"the database refused to store this outcome: {db.errors.one_line(exc)}"
        log.error("job %d (%s): %s", run.id, run.task.kind, refused)
        # Settle it as a failed execution, keeping the pre-run carry; if even that is
        # refused, dead; if that too, leave it to lease expiry rather than loop.
        run.outcome = ("failed", refused)
        try:
            ok = await self._settle_one(pool, run)
        except _RETRYABLE:
            raise
        except db.errors.STATEMENT_ERROR:
            run.outcome = ("dead", "outcome could not be stored")
            try:
                ok = await self._settle_one(pool, run)
            except _RETRYABLE:
                raise
            except db.errors.STATEMENT_ERROR:
                ok = False
        self._finish(run, run.outcome[0], ok)

    async def _settle_one(self, pool: Any, run: _Run) -> bool:
        assert run.outcome is not None
        what, payload = run.outcome
        me, sch = self._claimant, self.schema
        if run.cancel_requested and what != "complete":
            # An operator cancelled it and the handler stopped short of completing.
            detail = f"cancelled by an operator; the handler ended with {what}"
            run.outcome = ("cancelled", detail)
            return await db.jobs.job_cancel_if_owned(
                pool, schema=sch, claimant=me, job_id=run.id, attempt=run.attempt, detail=detail
            )
        if what == "pause":
            carry, at, after = payload
            return await db.jobs.job_pause_if_owned(
                pool,
                schema=sch,
                claimant=me,
                job_id=run.id,
                attempt=run.attempt,
                carry=carry,
                at=at,
                after=after,
            )
        if what == "dead":
            return await db.jobs.job_dead_if_owned(
                pool,
                schema=sch,
                claimant=me,
                job_id=run.id,
                attempt=run.attempt,
                reason=text_safe(payload),
            )
        if what == "undecodable":
            # No retry loop: a carry that does not decode now will not decode later.
            return await db.jobs.job_dead_if_owned(
                pool,
                schema=sch,
                claimant=me,
                job_id=run.id,
                attempt=run.attempt,
                reason=text_safe(payload),
            )
        if what == "release":
            return await db.jobs.job_release_if_owned(
                pool, schema=sch, claimant=me, job_id=run.id, attempt=run.attempt, detail=payload
            )
        if what == "retry":
            carry, after, reason = payload
            delay = after if after is not None else self._backoff(run.task).delay(run.failures + 1)
            status = await db.jobs.job_fail_if_owned(
                pool,
                schema=sch,
                claimant=me,
                job_id=run.id,
                attempt=run.attempt,
                event="retried",
                error=text_safe(reason) or "handler asked for a retry",
                carry=carry,
                delay=delay,
                force_dead=False,
            )
            return status is not None
        # failed (an exception, a bad outcome) or timed-out
        delay = self._backoff(run.task).delay(run.failures + 1)
        force = self.failures_to_dead and what == "failed"
        status = await db.jobs.job_fail_if_owned(
            pool,
            schema=sch,
            claimant=me,
            job_id=run.id,
            attempt=run.attempt,
            event=what,
            error=text_safe(payload),
            carry=None,
            delay=delay,
            force_dead=force,
        )
        if status is not None:
            log.info(
                "job %d (%s) attempt %d %s%s",
                run.id,
                run.task.kind,
                run.attempt,
                what,
                " and is dead" if status == "dead" else "",
                extra={"job_id": run.id, "kind": run.task.kind, "attempt": run.attempt},
            )
        return status is not None

    def _backoff(self, task: Task[Any]) -> Backoff:
        """The task's own retry backoff, else this worker's default."""
        return task.backoff if task.backoff is not None else self.backoff

    async def _release_orphans(self, pool: Any) -> None:
        running = [r.id for r in self._inflight.values()] + [r.id for r in self._unsettled]
        for row in await db.jobs.job_release_orphans_if_owned(
            pool, schema=self.schema, claimant=self._claimant, running=running
        ):
            self.stats["orphans_released"] += 1
            log.warning(
                "released job %d (%s): claimed by a statement whose answer was lost",
                row["id"],
                row["kind"],
                extra={"job_id": row["id"], "kind": row["kind"], "attempt": row["attempt"]},
            )

    # --- heartbeat: lease renewal and cancel requests ----------------------------

    def _beat_every(self) -> float:
        """The heartbeat's tick: a quarter of the shortest renewing lease, so a renewal due
        at a third of a lease happens before 0.6 of it has passed."""
        renewing = [self._lease(k) / 4 for k in self._tasks if self._renews(k)]
        return min([self.heartbeat, *renewing])

    async def _heartbeat_loop(self, pool: Any) -> None:
        """While handlers run: push forward every third of a lease the claims that renew
        (guarded by ownership, so a crash is still detected within one lease), and pass
        operators' cancel requests to the handlers' contexts."""
        tick = self._beat_every()
        while True:
            await asyncio.sleep(tick)
            runs = [r for r in self._inflight.values() if r.outcome is None]
            if not runs:
                continue
            now = time.monotonic()
            due = {r.id for r in runs if r.renew and now - r.renewed >= r.lease / 3}
            try:
                rows = await db.jobs.job_heartbeat_if_owned(
                    pool,
                    schema=self.schema,
                    claimant=self._claimant,
                    ids=[r.id for r in runs],
                    attempts=[r.attempt for r in runs],
                    leases=[r.lease if r.id in due else None for r in runs],
                )
            except TRANSIENT as exc:
                self.stats["db_errors"] += 1
                log.warning("heartbeat failed (retrying): %s", db.errors.one_line(exc))
                continue
            by_id = {r.id: r for r in runs}
            still = {id(r) for r in self._inflight.values() if r.outcome is None}
            for row in rows:
                run = by_id[row["id"]]
                if id(run) not in still:
                    continue  # finished (and maybe settled) while we asked: nothing to say
                extra = {"job_id": run.id, "kind": run.task.kind, "attempt": run.attempt}
                if row["renewed"]:
                    run.renewed = now
                    self.stats["leases_renewed"] += 1
                elif run.id in due or not row["owned"]:
                    if not run.cancel.is_set():
                        self.stats["claims_lost"] += 1
                        log.warning(
                            "job %d (%s) lost its claim while running (lease expired and "
                            "recovered elsewhere); asking its handler to stop",
                            run.id,
                            run.task.kind,
                            extra=extra,
                        )
                        run.cancel.set()
                if row["cancel_requested"] and row["owned"] and not run.cancel_requested:
                    run.cancel_requested = True
                    run.cancel.set()
                    log.info(
                        "job %d (%s): cancel requested by an operator",
                        run.id,
                        run.task.kind,
                        extra=extra,
                    )

    # --- shutdown ------------------------------------------------------------------

    async def _stop_handlers(self, why: str) -> None:
        """Cancel every running handler and wait, at most ``CANCEL_GRACE``, for them to
        end. A handler still running then is left to run on unobserved; its job is
        queued for release like the others."""
        for handle, run in self._inflight.items():
            run.stopped = why
            handle.cancel()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=CANCEL_GRACE)
        self._reap()
        for handle, run in list(self._inflight.items()):
            del self._inflight[handle]
            run.outcome = (
                "release",
                f"{why}; the handler did not stop within {CANCEL_GRACE:g}s of its cancellation",
            )
            self._unsettled.append(run)
            log.warning(
                "job %d (%s): handler still running %gs after its cancellation; releasing "
                "its job without waiting for it",
                run.id,
                run.task.kind,
                CANCEL_GRACE,
                extra={"job_id": run.id, "kind": run.task.kind, "attempt": run.attempt},
            )

    async def _abandon(self, pool: Any) -> None:
        """Cancel every handler and settle or release its job, within a few seconds."""
        await self._stop_handlers("worker stopped at once; handler cancelled")
        try:
            async with asyncio.timeout(5):
                await self._settle(pool)
        except Exception as exc:  # the jobs left fall to lease expiry
            log.warning("could not settle or release jobs while stopping: %s", exc)

    async def _drain(self, pool: Any) -> None:
        """Graceful shutdown (ADR 21): no more claims; ask handlers to stop, wait up to
        ``shutdown_timeout`` settling as they finish; then cancel and release the rest."""
        for run in self._inflight.values():
            run.cancel.set()
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
                await self._settle(pool)
        if self._inflight:
            log.warning(
                "shutdown_timeout (%.1fs) elapsed: cancelling %d handler(s) and releasing their jobs",
                self.shutdown_timeout,
                len(self._inflight),
            )
            await self._stop_handlers("shutdown_timeout elapsed; handler cancelled")
        # Settle what is left; if the database stays away, lease expiry recovers it.
        for attempt in range(1, 6):
            try:
                await self._settle(pool)
                break
            except TRANSIENT as exc:
                log.warning("settling at shutdown failed (%s); retrying", db.errors.one_line(exc))
                await asyncio.sleep(_ERROR_BACKOFF.delay(attempt))


class _Listener:
    """The dedicated LISTEN connection; reconnects with backoff when it drops, while the
    loop polls at least every second to cover the gap."""

    def __init__(self, worker: Worker[Any], pool: Any) -> None:
        self.worker = worker
        self.pool = pool
        self.conn: Any = None
        self.channel = sql.channel(worker.schema)
        self._closing = False
        self._reconnect: asyncio.Task[None] | None = None

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.worker._on_notify(payload)

    def _terminated(self, _conn: Any) -> None:
        self.worker._listening = False
        if not self._closing:
            log.warning("LISTEN connection lost; reconnecting (polling meanwhile)")
            self.worker.stats["listen_reconnects"] += 1
            if self.worker._m:
                self.worker._m.listen_reconnects.inc()
            self._spawn_reconnect()

    def _spawn_reconnect(self) -> None:
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.create_task(self._reconnect_loop())

    async def _connect(self) -> None:
        conn = await self.pool.acquire()
        try:
            await conn.add_listener(self.channel, self._notified)
            conn.add_termination_listener(self._terminated)
        except BaseException:
            await self._drop(conn)
            raise
        self.conn = conn
        self.worker._listening = True
        # Work may have arrived while we were not listening.
        self.worker._wake.set()

    async def start(self) -> None:
        try:
            await self._connect()
        except TRANSIENT as exc:
            log.warning(
                "LISTEN connection failed (%s); polling until it is back", db.errors.one_line(exc)
            )
            self._spawn_reconnect()

    async def _reconnect_loop(self) -> None:
        if self.conn is not None:
            old, self.conn = self.conn, None
            await self._drop(old)
        attempt = 0
        while not self._closing:
            attempt += 1
            await asyncio.sleep(_ERROR_BACKOFF.delay(attempt))
            try:
                await self._connect()
                log.info("LISTEN connection restored")
                return
            except TRANSIENT as exc:
                log.debug("LISTEN reconnect failed: %s", db.errors.one_line(exc))

    async def _drop(self, conn: Any) -> None:
        # Releasing resets the connection (UNLISTEN included) or, if it is broken, lets
        # the pool replace it.
        with contextlib.suppress(*TRANSIENT):
            await self.pool.release(conn, timeout=2)

    async def close(self) -> None:
        self._closing = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with contextlib.suppress(*TRANSIENT):
                await conn.remove_listener(self.channel, self._notified)
            await self._drop(conn)
        self.worker._listening = False
