"""Maintenance tasks run beside the claim loop, at their interval, and their failures stay
theirs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_for, wait_status
from tests.support import sql as test_sql
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
    left = [
        t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") == "run_forever"
    ]
    assert left == []


async def _at_least(task: Counting, n: int) -> bool:
    return task.runs >= n


class CutOff:
    """Runs a statement on a pool connection whose backend another session has ended:
    what a black-holed or restarted server does to a maintenance statement."""

    name = "cut_off"
    interval = 0.05

    def __init__(self, killer: asyncpg.Connection) -> None:
        self.killer = killer
        self.cut = 0

    async def run(self, pool: Any, worker: Any) -> None:
        async with pool.acquire() as c:
            await self.killer.fetchval(
                test_sql.statement("backend_terminate_wait"), c.get_server_pid()
            )
            self.cut += 1
            await c.fetchval(test_sql.statement("backend_terminate_wait"), 0)


async def test_a_lost_connection_is_one_line_and_a_bug_keeps_its_traceback(
    dsn: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    @venturi.task(kind="m_cut")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    cut = CutOff(conn)
    worker = Worker(None, dsn, [handler], poll_max=0.1, maintenance=[cut, Broken()])
    with caplog.at_level(logging.WARNING, logger="venturi.maintenance"):
        async with running(worker):
            await wait_for(lambda: _failed(worker, "cut_off", 2))
            await wait_for(lambda: _failed(worker, "broken", 1))
    said = [r for r in caplog.records if r.name == "venturi.maintenance"]
    cut_lines = [r for r in said if "maintenance cut_off failed" in r.getMessage()]
    bug_lines = [r for r in said if "maintenance broken failed" in r.getMessage()]
    assert cut.cut >= 2
    assert len(cut_lines) >= 2
    # The connection's loss: one line naming the error, no traceback.
    assert all(r.exc_info is None for r in cut_lines), [r.getMessage() for r in cut_lines]
    assert all("\n" not in r.getMessage() for r in cut_lines)
    # A task's own exception keeps its traceback: it may be a bug.
    assert bug_lines and all(r.exc_info is not None for r in bug_lines)


async def _failed(worker: Worker[Any], name: str, n: int) -> bool:
    return worker.stats[f"maintenance_errors:{name}"] >= n
