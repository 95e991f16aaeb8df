"""Running a worker (or a ``Pool`` of them) in the background of a test, and what the
worker tests share: a backoff that retries at once and a journal's events in order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol

import venturi
from venturi import Backoff


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


# Retries due almost at once: a retry path's test waits 50 ms, not the default backoff.
FAST = Backoff.fixed(0.05)


def events(journal: list[venturi.JournalEntry]) -> list[str]:
    """The journal's events in order, the form the tests compare."""
    return [e.event for e in journal]
