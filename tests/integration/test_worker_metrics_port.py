"""A worker whose metrics port is taken: a ConfigError naming metrics_port before it
opens anything, and the same worker runs once the port is free."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import running, wait_status
from tests.support.ports import free_port
from tests.support.sql import statement as tsql
from venturi import ConfigError, Context
from venturi.runtime.worker import Worker


async def _others(conn: asyncpg.Connection) -> int:
    # Sessions on this test's database besides this one: the worker's pool, if it leaked.
    return int(await conn.fetchval(tsql("backends_other")))


async def test_a_metrics_port_in_use_fails_before_the_pool_opens(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="mp_ok")
    async def ok(ctx: Context[Any], carry: int) -> None:
        return None

    port = free_port()
    worker = Worker(None, dsn, [ok], poll_max=0.1, metrics_port=port)
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", port))
        holder.listen()
        with pytest.raises(ConfigError, match=rf"^metrics_port {port}: cannot listen \("):
            await worker.run(asyncio.Event())
        # Nothing was opened: the pool leaked before, its connection still on the server.
        assert await _others(conn) == 0
    # Not left "already running": the same worker runs once the port is free.
    job = await ok.enqueue(conn, 1)
    async with running(worker):
        await wait_status(conn, job, "completed")
