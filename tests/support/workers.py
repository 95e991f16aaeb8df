"""Running a worker (or a ``Pool`` of them) in the background of a test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol


class Runs(Protocol):
    """A ``Worker`` or a ``Pool``: anything run until a shutdown event is set."""

    def run(self, shutdown: asyncio.Event) -> Awaitable[None]: ...


@contextlib.asynccontextmanager
async def running(runner: Runs) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``runner`` for the duration of the block (the block gets its task); shut it
    down gracefully after and re-raise anything it raised."""
    shutdown = asyncio.Event()
    task = asyncio.ensure_future(runner.run(shutdown))
    try:
        yield task
    finally:
        shutdown.set()
        await asyncio.wait_for(task, 60)
