"""Maintenance tasks run beside the claim loop, at their interval, and their failures stay
theirs."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_for, wait_status
from venturi import Context
from venturi.runtime.worker import Worker


class Counting:
    name = "counting"
    interval = 0.05

    def __init__(self) -> None:
        self.runs = 0
        self.seen_pool: Any = None

    async def run(self, pool: Any, worker: Any) -> None:
        self.runs += 1
        self.seen_pool = pool


class Broken:
    name = "broken"
    interval = 0.05

    async def run(self, pool: Any, worker: Any) -> None:
        raise RuntimeError("maintenance bug")


async def test_maintenance_runs_repeatedly_beside_the_loop_and_failures_do_not_stop_it(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="m_job")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    counting = Counting()
    worker = Worker(None, dsn, [handler], poll_max=0.1, maintenance=[counting, Broken()])
    async with running(worker):
        await wait_for(lambda: _at_least(counting, 3))
        job_id = await handler.enqueue(conn, Item(1))
        await wait_status(conn, job_id, "completed")
    assert counting.seen_pool is not None
    assert worker.stats["maintenance_errors:broken"] >= 1
    # Stopped with the worker: once run() has returned, no maintenance loop is left.
    left = [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "run_forever"]
    assert left == []


async def _at_least(task: Counting, n: int) -> bool:
    return task.runs >= n
