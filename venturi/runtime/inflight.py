"""The in-flight set: the worker's slots. The handler tasks running now, each with its
claimed job, and how many slots each kind occupies (a run holds its slot from its claim
until its settlement is written)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

from venturi.db.claims import Claimant
from venturi.db.conn import Record
from venturi.middleware import Middleware
from venturi.runtime import executor
from venturi.runtime.config import KindPolicy
from venturi.runtime.instruments import Instruments
from venturi.runtime.run import Run
from venturi.runtime.settlement import COMMITTED, Released
from venturi.runtime.transactional import JobTransactions

log = logging.getLogger("venturi.worker")

# The longest the worker waits, after it has released their jobs, for the handlers it
# cancelled to finish their clean-up (their ``except CancelledError`` or ``finally`` may
# still use the worker's pool, closed next); at shutdown it waits no longer than
# ``shutdown_timeout`` itself. A handler still running then runs on, unobserved, in the
# background: without a bound, one handler slow to stop would hold shutdown indefinitely.
CANCEL_GRACE = 5.0

# Python 3.12+: a handler's task takes its first step as it is created (an eager task),
# not on the loop's next pass. A handler that ends without waiting (a cache hit, a no-op)
# then never enters the loop's ready queue nor the set of all tasks, and every handler
# starts sooner after its claim (benchmarks/JOURNAL.md, "handlers start eagerly").
# Only the worker's own handler tasks: the tasks a handler creates are the loop's
# default kind, and a task factory the application set on the loop is kept.
EAGER = sys.version_info >= (3, 12)


def starts_eagerly(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``InFlight.start`` runs each handler's first step as it makes its task."""
    return EAGER and loop.get_task_factory() is None


async def let_them_start(rows: list[Record]) -> None:
    """Yield once, so that the handlers just started take their first step before the
    loop runs its next statement. Without it a claimed job started only after the loop
    had sent its next-visible lookup: 0.50 ms from start to handler at p50, against
    0.05 ms with the yield (benchmarks.tools.pickup, about a third of the worker's pickup).
    Handlers started eagerly (Python 3.12+) took that step as their tasks were made: the
    yield would be a pass of the loop per claim for nothing, and what a handler awaits
    then proceeds while the next statement is out."""
    if rows and not starts_eagerly(asyncio.get_running_loop()):
        await asyncio.sleep(0)


class InFlight:
    """Starts a claim's jobs, each as its own task, and stops them at shutdown.
    ``ended`` is called as each task ends (it wakes the loop). ``per_kind`` counts each
    kind's occupied slots: ``start`` takes them, ``vacate`` gives one back."""

    def __init__(
        self,
        state: Any,
        policies: Mapping[str, KindPolicy],
        ended: Callable[[], None],
        instruments: Instruments,
        schema: str = "venturi",
        claimant: Claimant | None = None,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        self.handles: dict[asyncio.Task[None], Run] = {}
        self.per_kind: Counter[str] = Counter()
        self._middleware = middleware
        self._state = state
        self._policies = policies
        self._ended = ended
        self._m = instruments.prom
        self._schema = schema
        self._claimant = claimant
        # The worker's pool, for the handlers' ctx.transaction(); set when it runs.
        self.pool: Any = None
        # The threads plain def handlers run on, one per slot; set when it runs.
        self.threads: Executor | None = None

    def __len__(self) -> int:
        return len(self.handles)

    def start(self, rows: list[Record]) -> None:
        """Start a claim's jobs at once (one clock reading and one loop lookup for the
        claim, not per job)."""
        m = self._m
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        pool, claimant = self.pool, self._claimant
        # A task named after its job only in asyncio's debug mode, where names are read:
        # the name costs about a microsecond per job (formatted, then set on the task).
        debug = loop.get_debug()
        # Read once per claim, not per row (issue 38).
        policies, per_kind, handles = self._policies, self.per_kind, self.handles
        state, middleware, ended, threads = self._state, self._middleware, self._ended, self.threads
        run_handler, schema = executor.run_handler, self._schema
        eager = starts_eagerly(loop)
        for row in rows:
            kind = row["kind"]
            policy = policies[kind]
            per_kind[kind] += 1
            run = Run.claimed(policy.task, row, policy.lease, policy.renew, now)
            tx = None
            if pool is not None and claimant is not None:
                tx = JobTransactions(pool, schema, claimant, run)
            coro = run_handler(run, state, tx, middleware, ended, threads)
            name = f"venturi job {run.id}" if debug else None
            if eager:
                # Its first step runs here, before the claim's next job is started: the
                # slot is counted already, and a handler that ends now is reaped as any.
                handle = asyncio.Task(coro, loop=loop, name=name, eager_start=True)  # type: ignore[call-arg]
            else:
                handle = loop.create_task(coro, name=name)
            handles[handle] = run
            if m:
                m.in_flight.labels(kind).inc()

    def reap(self) -> list[Run]:
        """Take the runs whose handler ended out of the running set, each with its
        outcome; their slots stay taken until ``vacate``."""
        ended = []
        m, handles, ending = self._m, self.handles, executor.ending
        for handle in [h for h in handles if h.done()]:
            run = handles.pop(handle)
            if m:
                m.run_seconds.labels(run.task.kind).observe(time.monotonic() - run.started)
            run.outcome = ending(handle, run)
            ended.append(run)
        return ended

    def vacate(self, run: Run) -> None:
        """Give back ``run``'s slot: its settlement is written (or its claim lost)."""
        self.per_kind[run.task.kind] -= 1
        if self._m:
            self._m.in_flight.labels(run.task.kind).dec()

    def vacate_many(self, runs: list[Run]) -> None:
        """``vacate`` each of ``runs`` (a claim's completions: one call, not one each)."""
        if self._m:
            for run in runs:
                self.vacate(run)
            return
        per_kind = self.per_kind
        for run in runs:
            per_kind[run.task.kind] -= 1

    def ask_to_stop(self) -> None:
        """Set every running handler's ``ctx.cancelled``: shutdown has begun."""
        for run in self.handles.values():
            run.ask_to_stop()

    def cancel_all(self) -> int:
        """Cancel every handler task, unmarked (a loop that died): how many."""
        handles = list(self.handles)
        for handle in handles:
            handle.cancel()
        return len(handles)

    async def stop(
        self, why: str, reap: Callable[[], None], queue: Callable[[Run], None]
    ) -> list[asyncio.Task[None]]:
        """Cancel every running handler. Those that end at once are reaped (``reap``
        queues them); the run of any other is given to ``queue`` at once, marked for
        release, without waiting for it. Returns the tasks of those: they run on, and
        the caller, once it has written the releases, may give them a bounded time to
        finish their clean-up."""
        for handle, run in self.handles.items():
            run.stopped = why
            handle.cancel()
        if self.handles:
            # One pass of the event loop: a handler that lets its cancellation propagate
            # ends in it, and is settled from its own ending.
            await asyncio.wait(list(self.handles), timeout=0)
        reap()
        left = list(self.handles)
        for handle in left:
            run = self.handles.pop(handle)
            run.outcome = (
                COMMITTED
                if run.committed
                else Released(
                    f"{why}; the handler did not stop when cancelled: its job is released "
                    "without waiting for it"
                )
            )
            queue(run)
            log.warning(
                "job %d (%s): handler still running after its cancellation; releasing its "
                "job without waiting for it",
                run.id,
                run.task.kind,
                extra=run.log_extra(),
            )
        return left
