"""Several worker loops in one process, supervised (``venturi.WorkerGroup``).

A loop (``Worker.run``) that dies of a bug outside a handler is logged and restarted
after ``restart_delay`` (one second); the others keep running meanwhile. Shutdown is
asked of every loop at once, and each drains as ``Worker.run`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from venturi.errors import ConfigError, VenturiError
from venturi.runtime.worker import Worker
from venturi.validate import seconds

log = logging.getLogger("venturi.supervisor")

DEFAULT_RESTART_DELAY = 1.0


class WorkerGroup:
    """Runs several ``venturi.Worker`` loops in one process until ``run``'s shutdown event.

    Give each loop its own kinds (one per group of kinds, say) or the same ones; loops
    that share an identity get ``/1``, ``/2``... appended so claims tell them apart. A
    loop that raises is restarted after ``restart_delay``; a ``VenturiError`` on a loop's
    first start (no database, no schema, bad configuration) stops the whole pool and is
    raised, as it would be from ``Worker.run``.
    """

    def __init__(
        self,
        workers: Iterable[Worker[Any]],
        *,
        restart_delay: timedelta | float = DEFAULT_RESTART_DELAY,
    ) -> None:
        self.workers = list(workers)
        if not self.workers:
            raise ConfigError("WorkerGroup: workers must hold at least one venturi.Worker")
        for w in self.workers:
            if not isinstance(w, Worker):
                raise ConfigError(f"WorkerGroup: workers must be venturi.Worker, got {w!r}")
        if len({id(w) for w in self.workers}) != len(self.workers):
            raise ConfigError("WorkerGroup: the same worker is given twice")
        self.restart_delay = seconds(restart_delay, "restart_delay", allow_zero=True)
        seen: dict[str, int] = {}
        for w in self.workers:
            seen[w.claimed_by] = seen.get(w.claimed_by, 0) + 1
        numbered: dict[str, int] = {}
        for w in self.workers:
            if seen[w.claimed_by] > 1:
                base = w.claimed_by
                numbered[base] = numbered.get(base, 0) + 1
                w.claimed_by = f"{base}/{numbered[base]}"
        # How many times each loop (by position) was restarted.
        self.restarts = [0] * len(self.workers)
        self._running = False

    def __repr__(self) -> str:
        return f"<venturi.WorkerGroup of {len(self.workers)} worker(s)>"

    async def run(self, shutdown: asyncio.Event) -> None:
        """Run every loop until ``shutdown`` is set; return once all have drained."""
        if self._running:
            raise ConfigError("this pool is already running")
        self._running = True
        stop = asyncio.Event()
        fatal: list[BaseException] = []

        async def watch() -> None:
            await shutdown.wait()
            stop.set()

        watcher = asyncio.create_task(watch())
        try:
            await asyncio.gather(
                *(self._supervise(i, w, stop, fatal) for i, w in enumerate(self.workers))
            )
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self._running = False
        if fatal:
            raise fatal[0]

    async def _supervise(
        self, index: int, worker: Worker[Any], stop: asyncio.Event, fatal: list[BaseException]
    ) -> None:
        first = True
        while not stop.is_set():
            try:
                await worker.run(stop)
            except VenturiError as exc:
                if first:
                    log.error("worker group: worker %s cannot start: %s", worker.claimed_by, exc)
                    fatal.append(exc)
                    stop.set()
                    return
                log.error(
                    "worker group: worker %s failed to restart: %s; retrying in %gs",
                    worker.claimed_by,
                    exc,
                    self.restart_delay,
                )
            except Exception:
                log.exception(
                    "worker group: worker %s died; restarting it in %gs",
                    worker.claimed_by,
                    self.restart_delay,
                )
            else:
                if stop.is_set():
                    return
                log.error(
                    "worker group: worker %s stopped by itself; restarting it", worker.claimed_by
                )
            first = False
            # Cancel the handlers the dead loop left running: their claims lapse at
            # lease expiry and are recovered like a crashed process's (at-least-once),
            # instead of running on with nobody to settle them.
            worker.cancel_handlers()
            self.restarts[index] += 1
            worker.stats["restarts"] += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.restart_delay):
                    await stop.wait()
