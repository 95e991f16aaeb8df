"""Waiting in tests: for a condition polled until a deadline, for a job's status, for a
worker's counters, never for a fixed length of time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import venturi
from tests.support import sql as test_sql


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], within: float = 15.0, every: float = 0.01
) -> None:
    """Poll an async predicate until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(every)


async def wait_until(predicate: Callable[[], bool], within: float = 15.0) -> None:
    """Poll a plain predicate (state the test's own tasks change) until it holds."""

    async def holds() -> bool:
        return predicate()

    await wait_for(holds, within)


async def wait_stat(
    worker: venturi.Worker[Any], key: str, at_least: int, within: float = 15.0
) -> None:
    """Wait until ``worker.stats[key]`` reaches ``at_least``: how a test knows that the
    worker has been round its loop (``empty_claims``, ``claimed``, ...) rather than
    guessing how long that takes."""
    await wait_until(lambda: worker.stats[key] >= at_least, within)


async def waits_on_a_lock(observer: Any, pid: int) -> bool:
    """Whether the session of process ``pid`` waits on a lock, as ``observer`` sees it."""
    return bool(await observer.fetchval(test_sql.statement("backend_waits_on_a_lock"), pid))


async def wait_blocked(observer: Any, other: Any) -> None:
    """Wait until the statement that connection ``other`` is running waits on a lock."""
    pid = other.get_server_pid()
    await wait_for(lambda: waits_on_a_lock(observer, pid))


async def status_of(conn: Any, job_id: int) -> str | None:
    job = await venturi.get_job(conn, job_id)
    return None if job is None else job.status


async def wait_status(conn: Any, job_id: int, status: str, within: float = 15.0) -> None:
    async def ok() -> bool:
        return await status_of(conn, job_id) == status

    await wait_for(ok, within)


async def until_cancelled() -> None:
    """What a handler awaits to run until it is cancelled (a timeout, a forced shutdown):
    it never returns by itself."""
    await asyncio.Event().wait()
