"""venturi.WorkerGroup: several worker loops in one process, a loop that dies restarted after a
second while the others keep working, and one graceful shutdown for all."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, until_cancelled, wait_status, wait_until
from venturi import Context, SchemaError, WorkerGroup
from venturi.runtime.loop import Loop
from venturi.runtime.worker import Worker


def _done_at(stamps: dict[int, float]) -> Any:
    @venturi.task(kind="pool_a")
    async def a(ctx: Context[Any], carry: Item) -> None:
        stamps[ctx.job.id] = time.monotonic()

    @venturi.task(kind="pool_b")
    async def b(ctx: Context[Any], carry: Item) -> None:
        stamps[ctx.job.id] = time.monotonic()

    return a, b


async def test_loops_run_side_by_side_and_stop_together(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    stamps: dict[int, float] = {}
    a, b = _done_at(stamps)
    started = asyncio.Event()

    @venturi.task(kind="pool_long")
    async def long(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        started.set()
        await ctx.cancelled()  # runs until shutdown asks it to stop
        return venturi.pause(Item(carry.n + 1))

    wa = Worker(None, dsn, [a, long], concurrency=4, poll_max=0.1)
    wb = Worker(None, dsn, [b], poll_max=0.1)
    pool = WorkerGroup([wa, wb])
    assert wa.claimed_by.endswith("/1") and wb.claimed_by.endswith("/2")  # told apart
    async with running(pool) as run:
        ids = [await a.enqueue(conn, Item(i)) for i in range(3)]
        ids += [await b.enqueue(conn, Item(i)) for i in range(3)]
        held = await long.enqueue(conn, Item(0))
        for job_id in ids:
            await wait_status(conn, job_id, "completed")
        await asyncio.wait_for(started.wait(), 15)
        assert not run.done()
    # Shutdown drained the loop holding the long job: checkpointed, not lost.
    job = await venturi.get_job(conn, held)
    assert job is not None and job.status == "pending" and job.carry == {"n": 1}
    assert pool.restarts == [0, 0]
    assert wa.stats["completed"] == 3 and wb.stats["completed"] == 3


async def test_a_loop_that_dies_is_restarted_after_a_second(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps: dict[int, float] = {}
    a, b = _done_at(stamps)
    wa = Worker(None, dsn, [a], poll_max=0.1)
    wb = Worker(None, dsn, [b], poll_max=0.1)
    crashed = asyncio.Event()
    crash_at: list[float] = []
    fill = Loop.fill

    async def bug_once(loop: Loop, *args: Any) -> bool:
        if loop.config is wa.config and not crashed.is_set():
            crash_at.append(time.monotonic())
            crashed.set()
            raise RuntimeError("a bug in the loop, outside any handler")
        return await fill(loop, *args)

    monkeypatch.setattr(Loop, "fill", bug_once)
    pool = WorkerGroup([wa, wb])
    async with running(pool):
        await asyncio.wait_for(crashed.wait(), 15)
        job_a = await a.enqueue(conn, Item(1))
        job_b = await b.enqueue(conn, Item(2))
        await wait_status(conn, job_b, "completed")
        await wait_status(conn, job_a, "completed")
    # The other loop kept working during the second (its job done before the dead loop's,
    # enqueued at the same time); the dead one ran again after it.
    assert stamps[job_b] < stamps[job_a]
    assert stamps[job_a] - crash_at[0] >= 1.0
    assert pool.restarts == [1, 0]
    assert wa.stats["restarts"] == 1


async def test_handlers_of_a_dead_loop_are_cancelled_and_their_job_released(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    running_first = asyncio.Event()
    cancelled: list[int] = []

    @venturi.task(kind="pool_inflight", lease=1.0)
    async def slow(ctx: Context[Any], carry: Item) -> None:
        if ctx.job.attempt == 1:
            running_first.set()
            try:
                await until_cancelled()
            except asyncio.CancelledError:
                cancelled.append(ctx.job.id)
                raise

    worker = Worker(
        None, dsn, [slow], concurrency=2, poll_max=0.1, backoff=venturi.Backoff.fixed(0)
    )
    reap = Loop.reap

    def bug_while_running(loop: Loop) -> None:
        if running_first.is_set() and not cancelled:
            raise RuntimeError("a bug in the loop while a handler runs")
        reap(loop)

    monkeypatch.setattr(Loop, "reap", bug_while_running)
    pool = WorkerGroup([worker])
    async with running(pool):
        job_id = await slow.enqueue(conn, Item(0))
        await asyncio.wait_for(running_first.wait(), 15)
        await wait_until(lambda: bool(cancelled))
        # The dying loop releases it (no wait for the lease) and the restarted loop runs it.
        await wait_status(conn, job_id, "completed", within=30)
    assert cancelled == [job_id]
    events = [e.event for e in await venturi.get_journal(conn, job_id)]
    assert events == ["enqueued", "claimed", "released", "claimed", "completed"]
    assert pool.restarts == [1]


async def test_a_loop_that_cannot_start_stops_the_pool(
    dsn: str, empty_dsn: str, kinds: list[str]
) -> None:
    a, _ = _done_at({})
    healthy = Worker(None, dsn, [a], poll_max=0.1)
    no_schema = Worker(None, empty_dsn, [a], poll_max=0.1)
    pool = WorkerGroup([healthy, no_schema])
    with pytest.raises(SchemaError, match="venturi schema apply"):
        await asyncio.wait_for(pool.run(asyncio.Event()), 60)
    assert pool.restarts == [0, 0]
