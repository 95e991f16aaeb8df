"""A run's end with a spawn write on the wire: the run's connection is closed, not reset.
asyncpg's pool, given back a connection whose statement was cancelled, first waits for
the server's answer to the cancel request (``PoolConnectionHolder.release``), which a
frozen network never sends: a stopping worker waited on it (the long chaos soak's slowed
minute). The fakes below behave as asyncpg does there."""

from __future__ import annotations

import asyncio
from typing import Any

import venturi
from tests.support import Item
from venturi.context import Child
from venturi.workflow.run import WorkflowRun
from venturi.workflow.spawn_writes import Unwritten


class FrozenConnection:
    """A connection whose statements never answer (a black-holed network)."""

    def __init__(self) -> None:
        self.sent = asyncio.Event()
        self.closed = asyncio.Event()
        self.cancelling = False

    async def fetch(self, *args: Any) -> Any:
        self.sent.set()
        try:
            await self.closed.wait()
        except asyncio.CancelledError:
            self.cancelling = True  # asyncpg sends a cancel request and waits for it
            raise
        raise ConnectionError("connection was closed in the middle of operation")

    def terminate(self) -> None:
        self.closed.set()


class OnePool:
    """asyncpg's pool as far as a run uses it: acquire, and a release that waits for a
    cancelled statement's end unless the connection was closed."""

    def __init__(self, conn: FrozenConnection) -> None:
        self.conn = conn
        self.released = asyncio.Event()

    async def acquire(self) -> FrozenConnection:
        return self.conn

    # asyncpg's signature, timeout included.
    async def release(self, conn: FrozenConnection, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if conn.cancelling and not conn.closed.is_set():
            await conn.closed.wait()  # the server's answer to the cancel request
        self.released.set()


@venturi.task(kind="spawn_writes_kid")
async def kid(ctx: venturi.Context[Any], carry: Item) -> None:
    """The children's task (nothing runs it here)."""


async def test_a_run_ending_with_its_spawn_write_on_the_wire_closes_the_connection() -> None:
    conn = FrozenConnection()
    pool = OnePool(conn)
    run = WorkflowRun(pool, "venturi", 1)
    run.records.steps, run.spawns.spare_ids = {}, [11, 12]
    run.spawns.defer(Unwritten("a", kid.job(Item(1)), None, Child(11, kid)))
    await asyncio.wait_for(conn.sent.wait(), 10)  # the write's statement went out
    # The handler raised or was stopped: the run ends while the write hangs.
    await asyncio.wait_for(run.release(), 10)
    assert conn.closed.is_set() and pool.released.is_set()
    assert run.spawns.writing is None and not run.spawns.unwritten
