"""Results: read back with get_result, hidden after the task's result_ttl, and cleared
from the rows by ResultCleanup, in batches, by many workers at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_for, wait_stat, wait_status
from venturi import Context, JobSpec, ResultCleanup, db, sql
from venturi.runtime.worker import Worker

# The claimant of the jobs these tests claim and settle through the store.
W1 = db.Claimant("w:1")


def _declare(ttl: float | None, kind: str) -> venturi.Task[Any]:
    @venturi.task(kind=kind, result_ttl=ttl)
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        if carry.n < 0:
            return venturi.complete()
        return venturi.complete({"n": carry.n, "squared": carry.n * carry.n})

    return handler


async def _drain(dsn: str, tasks: list[venturi.Task[Any]], conn: Any, ids: list[int]) -> None:
    worker = Worker(None, dsn, tasks, poll_max=0.1)
    async with running(worker):
        for job_id in ids:
            await wait_status(conn, job_id, "completed")


async def test_get_result_reads_what_complete_stored(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    keep = _declare(None, "r_keep")
    done, empty = await keep.enqueue(conn, Item(7)), await keep.enqueue(conn, Item(-1))
    pending = await keep.enqueue(conn, Item(3), after=3600)
    await _drain(dsn, [keep], conn, [done, empty])
    assert await venturi.get_result(conn, done) == {"n": 7, "squared": 49}
    assert await venturi.get_result(conn, empty) is None  # complete() without a result
    assert await venturi.get_result(conn, pending) is None  # not completed
    assert await venturi.get_result(conn, 10**9) is None  # no such job


async def test_result_expires_after_ttl_and_cleanup_clears_only_expired(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    # Long enough to outlast the drain on a loaded machine (0.3 s expired before the
    # first read once), short enough to wait out.
    short = _declare(3.0, "r_short")
    forever = _declare(None, "r_forever")
    old = [await short.enqueue(conn, Item(i)) for i in range(5)]
    kept = await forever.enqueue(conn, Item(9))
    await _drain(dsn, [short, forever], conn, [*old, kept])
    assert await venturi.get_result(conn, old[0]) == {"n": 0, "squared": 0}

    async def expired() -> bool:
        return await venturi.get_result(conn, old[0]) is None

    await wait_for(expired)
    # Expired for readers, but still on the rows until the cleanup runs.
    job = await venturi.get_job(conn, old[0])
    assert job is not None and job.result == {"n": 0, "squared": 0}
    fresh = await short.enqueue(conn, Item(5))
    await _drain(dsn, [short], conn, [fresh])

    worker = Worker(None, pool, [short, forever])
    await ResultCleanup(batch=2).run(pool, worker)  # 5 expired rows: batches of 2, 2, 1
    assert worker.stats["results_cleared"] == 5
    for job_id in old:
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "completed" and job.result is None
    assert await venturi.get_result(conn, fresh) == {"n": 5, "squared": 25}
    assert await venturi.get_result(conn, kept) == {"n": 9, "squared": 81}
    await ResultCleanup().run(pool, worker)
    assert worker.stats["results_cleared"] == 5  # nothing more to clear


async def test_cleanup_in_many_workers_clears_each_result_once(
    dsn: str, conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    short = _declare(0.05, "r_many")
    ids = [await short.enqueue(conn, Item(i)) for i in range(40)]
    await _drain(dsn, [short], conn, ids)

    async def all_expired() -> bool:
        return await venturi.get_result(conn, ids[-1]) is None

    await wait_for(all_expired)
    workers = [Worker(None, pool, [short]) for _ in range(4)]
    await asyncio.gather(*(ResultCleanup(batch=3).run(pool, w) for w in workers))
    assert sum(w.stats["results_cleared"] for w in workers) == 40
    for job_id in ids:
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "completed" and job.result is None, job_id


async def test_worker_runs_result_cleanup_as_maintenance(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    short = _declare(0.2, "r_maint")
    worker = Worker(None, dsn, [short], poll_max=0.1, maintenance=[ResultCleanup(interval=0.05)])
    async with running(worker):
        job_id = await short.enqueue(conn, Item(4))
        await wait_status(conn, job_id, "completed")

        async def cleared() -> bool:
            job = await venturi.get_job(conn, job_id)
            return job is not None and job.result is None

        await wait_for(cleared)
        # The row is cleared before the task counts it: wait for the count, not only the
        # row, or the shutdown below may cancel the task in between.
        await wait_stat(worker, "results_cleared", 1)
    assert worker.stats["results_cleared"] == 1
    assert worker.stats["maintenance_runs:result_cleanup"] >= 1


async def test_cleanup_reads_only_rows_that_still_hold_a_result(conn: asyncpg.Connection) -> None:
    # 10,000 completed jobs over five kinds through the library's own statements; one in
    # twenty stored a result. The cleanup must find those through jobs_result_idx, not
    # by reading every completed row again at each pass.
    specs = [JobSpec(f"k{i % 5}", "{}", 1, None, None, None, 25) for i in range(10_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs)
    kinds = [f"k{i}" for i in range(5)]
    rows = (
        await db.claims.job_claim(
            conn,
            schema="venturi",
            claimant=W1,
            kinds=kinds,
            leases=[3600.0] * 5,
            floor=0,
            limit=10_000,
        )
    ).claimed
    results = ['{"ok": true}' if i % 20 == 0 else None for i in range(len(rows))]
    await db.settle.job_complete_many_if_owned(
        conn,
        schema="venturi",
        claimant=W1,
        ids=[r["id"] for r in rows],
        attempts=[r["attempt"] for r in rows],
        results=results,
    )
    await conn.execute(sql.statement("maintenance/analyze"))
    plan = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) " + sql.statement("job_result_clear_expired").rstrip().rstrip(";"),
        "k1",
        0.001,  # every completed row is old enough: only the index tells them apart
        1000,
    )
    assert "jobs_result_idx" in json.dumps(json.loads(plan))
