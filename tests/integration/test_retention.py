"""Retention: finished jobs and their journal are deleted after their status's period, in
batches, never an unfinished job, and safely from many workers at once."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_for, wait_status, wait_until
from venturi import Context, Retention, admin, db
from venturi.runtime.worker import Worker


def _declare(kind: str) -> venturi.Task[Any]:
    @venturi.task(kind=kind)
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        if carry.n % 2:
            return venturi.dead("odd")
        return venturi.complete(carry.n)

    return handler


async def _finished_jobs(dsn: str, conn: Any, task: venturi.Task[Any], n: int) -> list[int]:
    """n jobs run to completion (even n) or dead (odd n)."""
    ids = [await task.enqueue(conn, Item(i)) for i in range(n)]
    worker = Worker(None, dsn, [task], poll_max=0.1)
    async with running(worker):
        for i, job_id in enumerate(ids):
            await wait_status(conn, job_id, "dead" if i % 2 else "completed")
    return ids


async def _exists(conn: Any, job_id: int) -> bool:
    return await venturi.get_job(conn, job_id) is not None


async def test_each_status_goes_after_its_own_period_with_its_journal(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    task = _declare("ret_mixed")
    ids = await _finished_jobs(dsn, conn, task, 6)
    completed, dead = ids[0::2], ids[1::2]
    cancelled = await task.enqueue(conn, Item(100))
    pending = await task.enqueue(conn, Item(101))
    later = await task.enqueue(conn, Item(102), after=3600)
    [change] = await admin.cancel_jobs(conn, [cancelled])
    assert change.done
    assert await db.journal.journal_get(
        conn, schema="venturi", job_id=dead[0]
    )  # dead jobs have journal rows
    worker = Worker(None, pool, [task])

    # Completed jobs go after a short period; dead and cancelled ones are kept (1 h).
    short_completed = Retention(completed=0.05, dead=3600, cancelled=3600, batch=2)

    async def completed_gone() -> bool:
        await short_completed.run(pool, worker)
        return not any([await _exists(conn, i) for i in completed])

    await wait_for(completed_gone)
    assert worker.stats["retention_deleted:completed"] == 3
    assert all([await _exists(conn, i) for i in [*dead, cancelled, pending, later]])

    # Now dead and cancelled: their journal rows go with them (ON DELETE CASCADE).
    await Retention(completed=None, dead=0.001, cancelled=0.001).run(pool, worker)
    assert worker.stats["retention_deleted:dead"] == 3
    assert worker.stats["retention_deleted:cancelled"] == 1
    for job_id in [*dead, cancelled]:
        assert not await _exists(conn, job_id)
        assert await db.journal.journal_get(conn, schema="venturi", job_id=job_id) == []
    # Unfinished jobs are never retention's, however short the periods.
    assert await _exists(conn, pending) and await _exists(conn, later)


async def test_none_keeps_a_status_forever(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    task = _declare("ret_keep")
    ids = await _finished_jobs(dsn, conn, task, 4)
    worker = Worker(None, pool, [task])
    await Retention(completed=None, dead=None, cancelled=None).run(pool, worker)
    assert all([await _exists(conn, i) for i in ids])
    assert not any(k.startswith("retention_deleted") for k in worker.stats)


async def test_many_workers_delete_each_job_once(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    task = _declare("ret_many")
    ids = await _finished_jobs(dsn, conn, task, 40)
    workers = [Worker(None, pool, [task]) for _ in range(4)]
    retention = Retention(completed=0.001, dead=0.001, batch=3)
    await asyncio.gather(*(retention.run(pool, w) for w in workers))
    deleted = sum(
        w.stats["retention_deleted:completed"] + w.stats["retention_deleted:dead"] for w in workers
    )
    assert deleted == 40
    assert not any([await _exists(conn, i) for i in ids])


async def test_worker_runs_retention_as_maintenance(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("ret_maint")
    worker = Worker(
        None,
        dsn,
        [task],
        poll_max=0.1,
        maintenance=[Retention(completed=0.05, interval=0.05)],
    )
    async with running(worker):
        job_id = await task.enqueue(conn, Item(2))
        await wait_for(lambda: _gone(conn, job_id))
        # The counter moves after the DELETE returns, a step behind the row's going: wait
        # for it before stopping the worker (a stop in between cancelled the count).
        await wait_until(lambda: worker.stats["retention_deleted:completed"] == 1)
    assert worker.stats["completed"] == 1
    assert worker.stats["retention_deleted:completed"] == 1


async def _gone(conn: Any, job_id: int) -> bool:
    return not await _exists(conn, job_id)
