"""The maintenance runner: periodic work a worker runs beside its claim loop, never on it
(the tasks themselves are in ``venturi.maintenance``).

A maintenance task is any object with a ``name``, an ``interval`` in seconds and an
``async def run(pool, worker)``. The worker runs each one every ``interval``, one after
another on one asyncio task beside the claim loop, but a task whose ``own_task`` is true
(the ``CronScheduler``, whose slots must not wait for a slow pass of another) runs on an
asyncio task of its own; a failure is logged and retried at the next interval, and never touches
the claim loop: in one line when the connection or the server failed it, with its
traceback when the task raised anything else. Tasks must be safe to run in many workers
at once (take an advisory lock, or use ``SKIP LOCKED``), since every worker may be
configured with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from venturi.db import errors as db_errors
from venturi.errors import ConfigError

log = logging.getLogger("venturi.maintenance")


@runtime_checkable
class MaintenanceTask(Protocol):
    """What ``Worker(maintenance=[...])`` accepts."""

    name: str
    interval: float

    async def run(self, pool: Any, worker: Any) -> None: ...


def check(tasks: Sequence[Any]) -> list[MaintenanceTask]:
    """Validate maintenance tasks when the worker is built; ``ConfigError`` names the bad one."""
    checked = []
    for t in tasks:
        if not isinstance(t, MaintenanceTask):
            raise ConfigError(
                f"maintenance: {t!r} needs a name, an interval and an async run(pool, worker)"
            )
        interval = t.interval
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
            raise ConfigError(
                f"maintenance {t.name!r}: interval must be positive, got {interval!r}"
            )
        checked.append(t)
    return checked


async def run_forever(tasks: Sequence[MaintenanceTask], pool: Any, worker: Any) -> None:
    """Run every task at its interval until cancelled; the first run happens at once."""
    if not tasks:
        return
    due = dict.fromkeys(range(len(tasks)), time.monotonic())
    while True:
        now = time.monotonic()
        for i, task in enumerate(tasks):
            if due[i] <= now:
                due[i] = now + task.interval
                started = time.monotonic()
                try:
                    await task.run(pool, worker)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    worker.stats[f"maintenance_errors:{task.name}"] += 1
                    if isinstance(exc, db_errors.RETRYABLE):
                        # The connection or the server, not the task: a lost connection,
                        # a deadline, a restart. One line, as the loop says it; the next
                        # interval runs on a connection the pool has replaced.
                        log.warning(
                            "maintenance %s failed (retrying in %gs): %s: %s",
                            task.name,
                            task.interval,
                            type(exc).__name__,
                            db_errors.one_line(exc),
                        )
                    else:  # may be a bug in the task: keep its traceback
                        log.warning("maintenance %s failed: %s", task.name, exc, exc_info=True)
                else:
                    worker.stats[f"maintenance_runs:{task.name}"] += 1
                    log.debug("maintenance %s ran in %.3fs", task.name, time.monotonic() - started)
        await asyncio.sleep(max(0.0, min(due.values()) - time.monotonic()))


# How long stopping waits for the maintenance task to end after its cancel.
STOP_WITHIN = 2.0


@contextlib.asynccontextmanager
async def running(tasks: Sequence[MaintenanceTask], pool: Any, worker: Any) -> Any:
    """Run the maintenance tasks for the duration of the block: those with ``own_task``
    each on an asyncio task of its own, the others one after another on one more."""
    alone = [t for t in tasks if getattr(t, "own_task", False)]
    shared = [t for t in tasks if t not in alone]
    groups = [[t] for t in alone] + ([shared] if shared else [])
    handles = [asyncio.create_task(run_forever(g, pool, worker)) for g in groups]
    try:
        yield
    finally:
        for handle in handles:
            handle.cancel()
        if handles:
            # A maintenance statement stuck on a frozen connection may not let go of
            # its cancel (the pool waits for the connection to answer): stop waiting
            # for it after a few seconds; closing the pool closes the connection.
            await asyncio.wait(handles, timeout=STOP_WITHIN)
        for handle in handles:
            if handle.done() and not handle.cancelled():
                handle.result()  # a maintenance bug, raised as before
