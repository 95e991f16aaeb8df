"""Retention: finished jobs and their journal are deleted after their status's period, in
batches, never an unfinished job, and safely from many workers at once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_for, wait_status, wait_until
from tests.support import sql as tsql
from venturi import Context, Retention, admin, db, testing
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


async def test_a_dead_parent_keeps_its_completed_children_until_it_goes(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    outage = {"on": True}

    @venturi.task(kind="ret_square", result=int)
    async def square(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n * carry.n)

    @venturi.task(kind="ret_parent", result=int, max_failures=1)
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn(f"sq-{i}", square, Item(i)) for i in range(3)]
        results = await ctx.gather(*kids)
        if outage["on"]:
            raise RuntimeError("outage after the children finished")
        return venturi.complete(sum(results))

    job_id = await parent.enqueue(conn, Item(0))
    await testing.drain(dsn, [parent, square])
    assert (await venturi.get_job(conn, job_id)).status == "dead"  # type: ignore[union-attr]
    # The dead parent may be retried: its completed children stay while it is kept.
    assert await admin.purge_count(conn, status="completed", older_than=0) == 0
    assert await admin.purge(conn, status="completed", older_than=0) == 0
    outage["on"] = False
    [change] = await admin.retry_jobs(conn, [job_id])
    assert change.done
    await testing.drain(dsn, [parent, square])
    assert await venturi.get_result(conn, job_id) == 0 + 1 + 4
    # A dead parent purged: its children go on the next pass.
    outage["on"] = True
    other = await parent.enqueue(conn, Item(0))
    await testing.drain(dsn, [parent, square])
    assert await admin.purge(conn, status="dead", older_than=0) == 1
    assert await venturi.get_job(conn, other) is None
    assert await admin.purge_count(conn, status="completed", older_than=0) == 7
    assert await admin.purge(conn, status="completed", older_than=0) == 7


async def _finished_ago(conn: Any, job_id: int, seconds: float) -> None:
    assert await conn.fetchval(tsql.statement("job_finished_ago"), job_id, seconds) == 1


async def test_a_key_held_by_unique_for_keeps_its_job_until_the_window_passes(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    @venturi.task(kind="ret_digest", unique_for=timedelta(hours=1))
    async def digest(ctx: Context[Any], carry: Item) -> None:
        return None

    one = await digest.enqueue(conn, Item(1), key="user1")
    [two] = await venturi.enqueue_many(conn, [digest.job(Item(2), key="user2")])
    plain = await digest.enqueue(conn, Item(3))
    await testing.drain(dsn, [digest])
    for job_id in (one, two, plain):
        await _finished_ago(conn, job_id, 1800)
    # Half an hour after they finished: the keys are held, their jobs stay.
    assert await admin.purge_count(conn, status="completed", older_than=0) == 1
    assert await admin.purge(conn, status="completed", older_than=0) == 1
    assert await venturi.get_job(conn, plain) is None
    await Retention(completed=0.001).run(pool, Worker(None, pool, [digest]))
    assert await digest.enqueue(conn, Item(1), key="user1") == one
    assert await venturi.enqueue_many(conn, [digest.job(Item(2), key="user2")]) == [two]
    # Past the hour: the keys are free, the jobs go.
    await _finished_ago(conn, one, 3700)
    assert await admin.purge_count(conn, status="completed", older_than=0) == 1
    assert await admin.purge(conn, status="completed", older_than=0) == 1
    assert await venturi.get_job(conn, one) is None
    assert await venturi.get_job(conn, two) is not None
    assert await digest.enqueue(conn, Item(1), key="user1") != one


async def test_a_keyed_job_retried_from_history_keeps_its_unique_for(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A retry of a dead job already moved to jobs_history copied it back without its
    # unique_for, so once it completed the purge took it inside the window and an enqueue
    # of its key made a second job (review probe).
    fail = [True]

    @venturi.task(kind="ret_again", unique_for=timedelta(hours=1), max_failures=1)
    async def again(ctx: Context[Any], carry: Item) -> None:
        if fail[0]:
            raise RuntimeError("upstream down")

    one = await again.enqueue(conn, Item(1), key="user1")
    await testing.drain(dsn, [again])
    assert (await venturi.get_job(conn, one)).status == "dead"  # type: ignore[union-attr]
    await admin.history.move_to_history(conn, after=0)
    [change] = await admin.retry_jobs(conn, [one])
    assert change.done, change
    fail[0] = False
    await testing.drain(dsn, [again])
    await _finished_ago(conn, one, 1800)
    assert await admin.purge(conn, status="completed", older_than=0) == 0
    assert await again.enqueue(conn, Item(1), key="user1") == one
