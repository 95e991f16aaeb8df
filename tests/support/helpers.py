"""Test helpers: run a worker in the background and wait for conditions without sleeps
of fixed length."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import venturi


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], within: float = 15.0, every: float = 0.01
) -> None:
    """Poll an async predicate until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(every)


async def status_of(conn: Any, job_id: int) -> str | None:
    job = await venturi.get_job(conn, job_id)
    return None if job is None else job.status


async def wait_status(conn: Any, job_id: int, status: str, within: float = 15.0) -> None:
    async def ok() -> bool:
        return await status_of(conn, job_id) == status

    await wait_for(ok, within)


@contextlib.asynccontextmanager
async def running(worker: venturi.Worker[Any]) -> AsyncIterator[asyncio.Event]:
    """Run ``worker`` for the duration of the block; shut it down gracefully after and
    re-raise anything the worker raised."""
    shutdown = asyncio.Event()
    task = asyncio.create_task(worker.run(shutdown))
    try:
        yield shutdown
    finally:
        shutdown.set()
        await asyncio.wait_for(task, 60)
