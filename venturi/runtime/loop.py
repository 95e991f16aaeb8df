"""The claim-and-dispatch loop of one worker run, and its state.

Each iteration settles what finished, claims into every free slot, and then sleeps until a handler finishes, a notification arrives, the
next scheduled job becomes visible (bounded by ``poll_max``) or shutdown is asked for.
Its parts: ``claimer`` (what to claim), ``inflight`` (the slots and running handlers),
``completer`` (writing settlements), ``recovery`` (expired claims and the loop's looks,
on a timer of its own beside the loop: ``Worker.run`` starts it). Shutdown drains: no
more claims, handlers asked to stop, then cancelled and their jobs released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from venturi import db
from venturi.db.conn import Conn, Record, Source
from venturi.runtime.claimer import Claimer
from venturi.runtime.completer import Completer
from venturi.runtime.config import KindPolicy, WorkerConfig
from venturi.runtime.inflight import CANCEL_GRACE, InFlight
from venturi.runtime.instruments import Instruments
from venturi.runtime.recovery import Recovery, recover_every
from venturi.runtime.run import Run
from venturi.runtime.shares import Shares

log = logging.getLogger("venturi.worker")

TRANSIENT, ERROR_BACKOFF = db.errors.TRANSIENT, db.errors.ERROR_BACKOFF

# With the LISTEN connection down, poll at least this often so pickup stays prompt.
POLL_WITHOUT_LISTENER = 1.0

# After shutdown, how long an iteration of the loop may take to come back before it is
# cut (normally milliseconds; a statement on a frozen connection never comes back).
CUT_AFTER = 1.0

# While groups keep a worker busy, its claim of jobs without a group, once it found none,
# is not repeated on every iteration (a round trip and a commit each: grouped drains +6 %
# without them, benchmarks/JOURNAL.md), only after a notification (an enqueue), a lookup that
# finds a job due, or this many seconds: the most a job without a group that becomes
# visible by its time (a retry's backoff, a schedule, a recovery) waits for it.
PLAIN_RECHECK = 0.05

# How long stopping waits for a connection to let go before it is closed by force (a
# statement stuck on a frozen connection).
CLOSE_WITHIN = 2.0


class Loop:
    """One worker run's loop under ``claimant``'s token, for the kinds of ``policies``.
    Made afresh by each ``Worker.run``; ``wake`` is set by anything that may give the
    loop work (a handler ending, a notification, shutdown)."""

    def __init__(
        self,
        config: WorkerConfig,
        claimant: db.Claimant,
        state: Any,
        policies: Mapping[str, KindPolicy],
        instruments: Instruments,
    ) -> None:
        self.config = config
        self.policies = policies
        self.instruments = instruments
        self.wake = asyncio.Event()
        # Is the LISTEN connection up? Without it the loop polls.
        self.listening = False
        # After a database error that was about a statement: settle one run at a time.
        self.isolate = False
        # After any database error: a claim whose answer was lost may have claimed jobs
        # that nobody runs; look for them once the database is back.
        self.orphans_possible = False
        # Notifications seen, and when the claim of jobs without a group last found none
        # (with the count then): see PLAIN_RECHECK.
        self.notified = 0
        self.plain_dry: tuple[float, int] | None = None
        schema = config.schema
        # Each handler's end sets wake directly: Loop.ended would be a frame more per job.
        self.inflight = InFlight(
            state, policies, self.wake.set, instruments, schema, claimant, config.middleware
        )
        self.recovery = Recovery(
            schema, config.claimed_by, config.backoff, instruments, recover_every(config.poll_max)
        )
        self.claimer = Claimer(config, claimant, policies, self.inflight.per_kind, instruments)
        self.shares = Shares(schema, config.concurrency)
        self.completer = Completer(
            schema,
            claimant,
            policies,
            config.failures_to_dead,
            instruments,
            self.inflight,
            config.synchronous_commit,
        )

    # --- what wakes it ---------------------------------------------------------------

    async def watch(self, shutdown: asyncio.Event) -> None:
        await shutdown.wait()
        self.wake.set()

    def on_notify(self, payload: str) -> None:
        kinds = payload.split(",") if payload else None
        if kinds is None or any(k in self.policies for k in kinds):
            self.notified += 1
            self.claimer.limits.wet(kinds)
            self.wake.set()

    def on_listening(self, up: bool) -> None:
        self.listening = up
        if up:
            self.notified += 1
            self.claimer.limits.wet()
            # Work may have arrived while we were not listening.
            self.wake.set()

    # --- running ---------------------------------------------------------------------

    def held(self) -> int:
        """Jobs held now: running, or waiting for their settlement."""
        return len(self.inflight) + len(self.completer.unsettled)

    async def run_until(self, conn: Source, shutdown: asyncio.Event) -> None:
        """Run the loop until shutdown. An iteration that has not come back ``CUT_AFTER``
        seconds after shutdown is waiting on a statement that may never answer (a
        black-holed connection): cut it, so the drain starts now. Its claim may have
        committed with the answer lost: the drain releases such orphans."""
        loop = asyncio.create_task(self.run(conn, shutdown))
        stop = asyncio.create_task(shutdown.wait())
        try:
            await asyncio.wait([loop, stop], return_when=asyncio.FIRST_COMPLETED)
            if not loop.done():
                await asyncio.wait([loop], timeout=CUT_AFTER)
            if not loop.done():
                log.warning(
                    "stopping: the worker loop is waiting on the database; abandoning "
                    "that statement to drain now"
                )
                loop.cancel()
                await asyncio.wait([loop])
                self.orphans_possible = True
                return
            loop.result()  # a bug in the loop: raised, and the run abandons its jobs
        finally:
            stop.cancel()
            if not loop.done():  # run() itself cancelled
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop

    async def run(self, conn: Source, shutdown: asyncio.Event) -> None:
        """Iterate until shutdown, waiting between iterations as each one decides."""
        errors = 0
        while not shutdown.is_set():
            # Cleared before the work, so that anything arriving meanwhile (a finished
            # handler, a notification) makes the wait below return at once.
            self.wake.clear()
            try:
                timeout = await self.iterate(conn, shutdown)
                errors = 0
            except TRANSIENT as exc:
                errors += 1
                timeout = self.failed(exc, errors)
            if not self.listening:
                timeout = min(timeout, POLL_WITHOUT_LISTENER)
            if self.completer.unsettled:
                timeout = min(timeout, ERROR_BACKOFF.delay(max(errors, 1)))
            timeout = max(timeout, 0.0)
            if timeout == 0.0 and not shutdown.is_set():
                continue
            try:
                async with asyncio.timeout(timeout):
                    await self.wake.wait()
            except TimeoutError:
                # Woken by the time alone (a job or a group's wake-up due, poll_max):
                # grouped kinds left resting claim again (Limits.dry).
                self.claimer.limits.wet()

    async def iterate(self, conn: Source, shutdown: asyncio.Event) -> float:
        """One iteration: settle, claim into free slots; how long to wait."""
        completer, claimer = self.completer, self.claimer
        timeout = self.config.poll_max
        self.reap()
        if self.orphans_possible:
            await completer.written_already(conn)
            running = [r.id for r in self.inflight.handles.values()]
            await completer.release_orphans(conn, running + [r.id for r in completer.unsettled])
            self.orphans_possible = False
        if self.isolate:
            await completer.settle(conn, isolate=True)
            self.isolate = False
        await completer.settle(conn, completes=False)
        completes = completer.completes()
        # Completions ride the next claim: their slots count as free already.
        busy = len(self.inflight) + len(completer.unsettled) - len(completes)
        free = self.config.concurrency - busy
        if free > 0:
            began = time.monotonic()
            short = await self.fill(conn, free, shutdown, completes)
            token_wait = claimer.limits.token_wait(began)
            if token_wait is None and claimer.tokens_short:
                token_wait = 0.0  # refilled since the claim left its kind out: claim again
            if short:
                # Idle slots: wake exactly when the next scheduled job is due.
                timeout = await claimer.until_next_visible(conn)
                if timeout == 0.0:
                    self.plain_dry = None  # a job is due: every claim looks again
                    claimer.limits.wet()
                if token_wait is not None:
                    timeout = min(timeout, token_wait)
            elif not claimer.claimable_now(time.monotonic()):
                # Every kind at its cap (only a finish helps) or out of tokens. (Not
                # claimable_kinds, the ordinary claim's alone: a worker whose kinds all
                # have a shared rate or a global cap then slept poll_max after a grouped
                # claim that said to claim again, past its scheduled jobs coming due.)
                if token_wait is not None:
                    timeout = min(timeout, token_wait)
            else:
                timeout = 0.0  # slots remain and the queue had more: go again
        else:
            await completer.settle(conn)  # all slots busy: only a finish helps
        if claimer.grouped and self.shares.unread():
            await self.shares.look(conn)  # the first time only; then on the timer
        return timeout

    async def look(self, conn: Conn) -> None:
        """What a busy loop would not find by itself, looked for on the recovery's timer
        (``Recovery.run``), beside the loop, so that the loop's connection carries claims
        and settlements only (on a slow network each look was a round trip more before
        the next claim, which carries the completions): due workflow timers, which
        ``until_next_visible`` wakes only when the loop idles; kinds that got groups
        since; the groups' weights for the shares of jobs without a group; token
        wake-ups made at a slower group rate than this worker's."""
        claimer = self.claimer
        await claimer.wake_due_timers(conn)
        if await claimer.look_for_groups(conn):
            self.wake.set()  # their grouped jobs are claimed at the next iteration
        if claimer.grouped:
            await self.shares.look(conn)
            if moved := await claimer.advance_refills(conn):
                log.info(
                    "%d groups' token wake-ups moved forward to this worker's group_rate", moved
                )
                self.wake.set()

    def failed(self, exc: BaseException, errors: int) -> float:
        """A database error in an iteration (the ``errors``-th in a row): how long to
        wait before the next."""
        delay = ERROR_BACKOFF.delay(errors)
        self.instruments.db_error()
        # A claim that failed may have committed with its answer lost: its jobs are
        # claimed by us and run by no one. Look for them once we are back.
        self.orphans_possible = True
        if not isinstance(exc, db.errors.RETRYABLE) and self.completer.unsettled:
            # Possibly one outcome the database refuses: settle the queue one run at a
            # time next, so a poisoned write cannot wedge the rest.
            self.isolate = True
        log.warning(
            "database error in the worker loop (retrying in %.2fs): %s",
            delay,
            db.errors.one_line(exc),
        )
        return delay

    async def fill(self, conn: Source, free: int, shutdown: asyncio.Event, done: list[Run]) -> bool:
        """Settle ``done`` and claim into the free slots; True when the queue had nothing
        more to give."""
        if self.claimer.grouped:
            return await self.fill_with_groups(conn, free, shutdown, done)
        start = self.inflight.start
        return (await self.fill_ordinary(conn, free, shutdown, done, (start, start)))[1]

    async def fill_ordinary(
        self,
        conn: Source,
        free: int,
        shutdown: asyncio.Event,
        done: list[Run],
        starts: tuple[Callable[[list[Record]], None], Callable[[list[Record]], None]],
        left_out: AbstractSet[str] = frozenset(),
        plain: bool = True,
    ) -> tuple[int, bool]:
        """The claims that are not the groups', into ``free`` slots, of the kinds not
        ``left_out``: the ordinary claim (``done`` riding it; skipped while it rests, not
        ``plain``), and each kind with a shared rate or a global cap in a claim of its own,
        before or after the ordinary claim by tier. ``starts``: what starts the ordinary
        claim's rows, and the others'. Returns the slots left and whether the queue ran dry."""
        claimer, short = self.claimer, False
        limited = bool(claimer.limits.shared or claimer.limits.global_caps)
        # By tier (Claimer.limited_first), a turn taken only when there are slots to give:
        # one that a claim before this took every slot of would fall in step with others.
        limited_first = limited and free > 0 and claimer.limited_first(plain)
        if limited_first and claimer.limits.any_capped(done):
            # A global cap counts claimed rows: this worker's finished runs of the kind
            # hold their places until settled, and would leave it "at its cap".
            await self.completer.settle(conn)
            done = []
        if limited_first:
            free = await self.fill_limited(conn, free, shutdown, starts[1], left_out)
        if plain:
            # The notifications seen before the claim was sent: one that arrives while it
            # is in flight may be for a job its snapshot missed, and must end the rest.
            notified = self.notified
            free, short, unsent = await claimer.fill(
                conn, free, shutdown, done, self.completer.completed, starts[0], left_out
            )
            # A claim that left kinds out (their share, cap or bucket) does not show that
            # there is nothing to claim (test_group_neighbours.py: poll_max a place).
            resting = short and not left_out and not claimer.held_out
            self.plain_dry = (time.monotonic(), notified) if resting else None
            if short and claimer.grouped:
                self.shares.found_all(claimer.grouped, left_out)
        else:
            unsent = bool(done)  # no claim ran to carry them
        if unsent:
            await self.completer.settle(conn)
        if limited and not limited_first:
            free = await self.fill_limited(conn, free, shutdown, starts[1], left_out)
        # Slots left over: wait for the next scheduled job or the next token.
        return free, short or (limited and free > 0)

    async def fill_limited(
        self,
        conn: Source,
        free: int,
        shutdown: asyncio.Event,
        start: Callable[[list[Record]], None],
        left_out: AbstractSet[str],
    ) -> int:
        """Claim each kind with a shared rate or a global cap in a claim of its own, by
        tier (Claimer.capped_first); the slots still free."""
        claimer = self.claimer
        fills = [(bool(claimer.limits.shared), claimer.fill_shared)]
        fills.append((bool(claimer.limits.global_caps), claimer.fill_capped))
        for some, fill in reversed(fills) if claimer.capped_first() else fills:
            if some and free > 0 and not shutdown.is_set():
                free -= await fill(conn, free, start, left_out)
        return free

    async def fill_with_groups(
        self, conn: Source, free: int, shutdown: asyncio.Event, done: list[Run]
    ) -> bool:
        """``fill`` for a worker with grouped kinds. The groups' claim and the others go
        first by tier (``Tiers``), and take turns within one: neither a backlog of jobs
        without a group nor the groups wait for the other. A grouped kind's jobs without a
        group that took their share (``Shares``) are left out of the others' claims, and
        take only the slots the groups leave; the other kinds' jobs keep their turns."""
        claimer, shares = self.claimer, self.shares
        grouped, completed = claimer.grouped, self.completer.completed
        tiers, now, plain = claimer.tiers, time.monotonic(), not self.plain_resting()
        live = claimer.limits.live(now, grouped, plain)  # the claims that may run now
        streams, differ = [n for n in live if n.startswith("grouped:")], tiers.differ(live)
        level = claimer.level("tiers") if shares.tiered() or differ else 0
        reserved = level > 0  # and under strict priority, a look a second (Tiers.peek):
        peek = differ and claimer.priority_ratio is None and tiers.peek(now, "grouped")
        left_out = shares.held_back(grouped, now, reserved)

        # Each claim's rows are counted against the shares as they start.
        def counted(rows: list[Record]) -> None:
            shares.took(rows, grouped, claimer.floor == 0)
            self.inflight.start(rows)

        def plain_counted(rows: list[Record]) -> None:
            shares.took(rows, grouped, claimer.floor == 0, grouped - left_out)
            self.inflight.start(rows)

        starts, again = (plain_counted, counted), False
        # The groups go first by tier against the claims that may run (but in a turn
        # reserved for the lower: Tiers), in their turn within one (Shares.groups_first),
        # whenever the ordinary claim rests, and when it would leave every kind out (the
        # completions then ride the groups' claim, not a statement of their own).
        rest = [n for n in live if n not in streams]
        grouped_first = None if shares.letting_in else tiers.goes_first(streams, rest, level, peek)
        if grouped_first is None:  # of one tier (a limited kind of a better one goes first)
            turn = shares.groups_first(reserved, lambda: claimer.turn("grouped"))
            grouped_first = turn or not plain or left_out.issuperset(claimer.kinds)
        if grouped_first and free > 0 and not shutdown.is_set():
            # The completions ride whichever claim runs first.
            taken, again, done = await claimer.fill_grouped(
                conn, free, counted, done, completed, level, peek
            )
            free -= taken
            if free > 0:  # the groups left slots: the jobs without a group may take them
                shares.groups_left_slots()
                left_out = frozenset()
        free, _ = await self.fill_ordinary(conn, free, shutdown, done, starts, left_out, plain)
        if not grouped_first and free > 0 and not shutdown.is_set():
            taken, again, _ = await claimer.fill_grouped(
                conn, free, counted, [], completed, level, peek
            )
            free -= taken
            if free > 0 and left_out and not shutdown.is_set():
                # The groups left slots: the jobs without a group held back take them now,
                # owing nothing for them (their kinds only: the others had their claim).
                shares.groups_left_slots()
                left_out = frozenset(claimer.kinds) - left_out
                free, _ = await self.fill_ordinary(conn, free, shutdown, [], starts, left_out)
        # Short only if slots are left: a claim of jobs without a group that found fewer
        # than it asked for is not, when the groups filled the rest (the next finish wakes
        # the loop; a lookup of the next visible job would be wasted).
        return free > 0 and not again

    def plain_resting(self) -> bool:
        """Whether the claim of jobs without a group skips this iteration: it found none
        less than PLAIN_RECHECK ago, and no notification has come since."""
        dry = self.plain_dry
        return (
            dry is not None
            and dry[1] == self.notified
            and time.monotonic() - dry[0] < PLAIN_RECHECK
        )

    def reap(self) -> None:
        """Move finished handlers from the in-flight set to the settle queue."""
        ended = self.inflight.reap()
        self.claimer.limits.places_freed(ended)
        self.completer.take(ended)

    # --- shutdown --------------------------------------------------------------------

    async def abandon(self, conn: Source) -> None:
        """Cancel every handler and settle or release its job, within a few seconds."""
        why = "worker stopped at once; handler cancelled"
        stragglers = await self.inflight.stop(why, self.reap, self.completer.queue)
        try:
            async with asyncio.timeout(5):
                await self.completer.settle(conn)
        except Exception as exc:  # the jobs left fall to lease expiry
            log.warning("could not settle or release jobs while stopping: %s", exc)
        if stragglers:
            await asyncio.wait(stragglers, timeout=CANCEL_GRACE)

    async def drain(self, conn: Source) -> None:
        """Graceful shutdown: no more claims; ask handlers to stop (their contexts'
        ``cancelled`` is set), wait up to ``shutdown_timeout`` settling each as it
        finishes; then cancel the rest and release their jobs at once, which are not
        failures. A cancelled handler's clean-up then gets at most ``shutdown_timeout``
        again (and at most ``CANCEL_GRACE``), whatever it does."""
        inflight, grace = self.inflight, self.config.shutdown_timeout
        inflight.ask_to_stop()
        deadline = time.monotonic() + grace
        while inflight.handles:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait(
                list(inflight.handles), timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            self.reap()
            with contextlib.suppress(*TRANSIENT):
                await self.completer.settle(conn)
        stragglers: list[asyncio.Task[None]] = []
        if inflight.handles:
            log.warning(
                "shutdown_timeout (%.1fs) elapsed: cancelling %d handler(s) and releasing their jobs",
                grace,
                len(inflight),
            )
            why = "shutdown_timeout elapsed; handler cancelled"
            stragglers = await inflight.stop(why, self.reap, self.completer.queue)
        await self.settle_left(conn)  # the releases are written now, at the timeout
        if stragglers:
            await asyncio.wait(stragglers, timeout=min(grace, CANCEL_GRACE))

    async def settle_left(self, conn: Source) -> None:
        """Settle what is left, and release any job a cut claim took; if the database
        stays away, lease expiry recovers them. Bounded: each statement by its deadline,
        the whole by two of them."""
        completer = self.completer
        deadline = self.config.statement_deadline()
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
                        await asyncio.sleep(ERROR_BACKOFF.delay(attempt))
        except TimeoutError:
            log.warning(
                "could not settle %d job(s) while stopping: the database does not answer; "
                "their leases expire and they are recovered",
                len(completer.unsettled),
            )
        if self.orphans_possible:
            # Best effort, briefly: lease expiry recovers them too.
            with contextlib.suppress(*TRANSIENT):
                async with asyncio.timeout(min(deadline, CLOSE_WITHIN)):
                    await completer.release_orphans(conn, [r.id for r in completer.unsettled])
                    self.orphans_possible = False
