"""``venturi.wait``: woken by the finished job's notification (polling only as a
fallback), ``TimeoutError`` after its timeout."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_for
from venturi import Context, db
from venturi.runtime.worker import Worker

W = db.Claimant("w:1")


async def _awaited(conn: asyncpg.Connection, job_id: int) -> bool:
    # Test-side read: has the waiter marked the job yet?
    return bool(await conn.fetchval("SELECT awaited FROM venturi.jobs WHERE id = $1", job_id))


async def test_wait_is_woken_by_the_completion_not_by_polling(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    release = asyncio.Event()

    @venturi.task(kind="w_ok")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        await release.wait()
        async with ctx.transaction() as tx:
            await ctx.complete(tx, result=carry.n)

    job_id = await handler.enqueue(conn, Item(5))
    async with running(Worker(None, dsn, [handler], poll_max=0.2)):
        # A poll far longer than the deadline: only the notification can wake it in time.
        # (How soon after the commit it wakes is benchmarks.scenarios.wait_latency's measurement.)
        waiting = asyncio.create_task(venturi.wait(pool, job_id, poll=600))
        await wait_for(lambda: _awaited(conn, job_id))
        release.set()
        job = await asyncio.wait_for(waiting, 30)
    assert job.status == "completed" and job.result == 5


async def test_wait_returns_a_finished_job_at_once_and_times_out_on_a_pending_one(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_time")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    pending = await handler.enqueue(conn, Item(1))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=f"job {pending} is still pending"):
        await venturi.wait(conn, pending, timeout=0.2)
    assert time.monotonic() - started >= 0.2
    [change] = await venturi.admin.cancel_jobs(conn, [pending])
    assert change.done
    job = await venturi.wait(conn, pending, timeout=0)
    assert job.status == "cancelled"
    with pytest.raises(venturi.VenturiError, match="does not exist"):
        await venturi.wait(conn, pending + 1000)


async def test_wait_inside_an_open_transaction_falls_back_to_polling(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_poll")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    job_id = await handler.enqueue(conn, Item(1))
    async with conn.transaction():
        waiting = asyncio.create_task(venturi.wait(conn, job_id, poll=0.05, timeout=30))
        async with running(Worker(None, dsn, [handler], poll_max=0.2)):
            job = await asyncio.wait_for(waiting, 30)
    assert job.status == "completed"
    # It never marked the row: that would have held its lock until this transaction ended.
    assert not await _awaited(conn, job_id)


async def test_a_dead_job_wakes_its_waiter_too(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    release = asyncio.Event()

    @venturi.task(kind="w_dead", max_failures=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        await release.wait()
        raise RuntimeError("no")

    job_id = await handler.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.2)):
        waiting = asyncio.create_task(venturi.wait(pool, job_id, poll=600))
        await wait_for(lambda: _awaited(conn, job_id))
        release.set()
        job = await asyncio.wait_for(waiting, 30)
    assert job.status == "dead"


async def test_a_job_no_one_waits_for_notifies_nothing(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    heard: list[str] = []
    listener = await asyncpg.connect(dsn)
    await listener.add_listener("venturi_done", lambda *a: heard.append(a[-1]))

    @venturi.task(kind="w_none")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    try:
        quiet = await handler.enqueue(conn, Item(1))
        awaited = await handler.enqueue(conn, Item(2))
        await db.reads.job_mark_awaited(conn, schema="venturi", job_id=awaited)
        async with running(Worker(None, dsn, [handler], poll_max=0.2)):
            await wait_for(lambda: _heard(heard, str(awaited)))
        assert (await venturi.get_job(conn, quiet)).status == "completed"  # type: ignore[union-attr]
        assert heard == [str(awaited)]
    finally:
        await listener.close()


async def _heard(heard: list[str], payload: str) -> bool:
    return payload in heard
