"""How soon ``venturi.wait`` wakes after the job it waits on commits its completion.

    python -m benchmarks.scenarios.wait_latency [--samples 200] [--dsn ADMIN_DSN]

One database of its own, one process: a worker (concurrency 1) runs a handler that holds
until the harness releases it, then completes the job in its own transaction and notes
the time as it commits. The waiter, ``venturi.wait(pool, job_id, poll=600)``,
starts before the release, so only the completion's notification can wake it. Printed:
p50, p99 and max of commit sent -> waiter returned, in milliseconds. The issue that added the
notification wake-up asked for well under 100 ms; the test suite only checks that the
wake-up comes from the notification (tests/integration/test_wait.py), not how fast.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import asyncpg

import venturi
from benchmarks.common import add_dsn_option, percentile, scratch_database
from benchmarks.systems.venturi import Noop
from venturi import db, sql
from venturi.runtime.worker import Worker

SCHEMA = sql.DEFAULT_SCHEMA
releases: dict[int, asyncio.Event] = {}
committed: dict[int, float] = {}


@venturi.task(kind="bench_wait_latency")
async def held(ctx: venturi.Context[Any], carry: Noop) -> None:
    await releases[ctx.job.id].wait()
    async with ctx.transaction() as tx:
        await ctx.complete(tx, result=carry.i)
        # Taken as the commit is sent: the waiter, on this loop too, may well run before
        # this handler resumes after the commit.
        committed[ctx.job.id] = time.monotonic()


async def sample(conn: Any, pool: Any, n: int) -> float:
    job_id = await held.enqueue(conn, Noop(n))
    releases[job_id] = asyncio.Event()
    waiting = asyncio.create_task(venturi.wait(pool, job_id, poll=600))
    await asyncio.sleep(0.05)  # the waiter's LISTEN in place before the release
    releases[job_id].set()
    await asyncio.wait_for(waiting, 30)
    return time.monotonic() - committed[job_id]


async def amain(args: argparse.Namespace) -> list[float]:
    async with scratch_database(args.dsn, f"bench_venturi_wait_{os.getpid()}") as dsn:
        conn = await asyncpg.connect(dsn)
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
        try:
            await db.schema.apply_schema(conn, schema=SCHEMA)
            worker: Worker[None] = Worker(None, dsn, [held], concurrency=1, poll_max=0.2)
            stop = asyncio.Event()
            run = asyncio.create_task(worker.run(stop))
            try:
                await sample(conn, pool, -1)  # the first one warms the connections up
                return [await sample(conn, pool, n) for n in range(args.samples)]
            finally:
                stop.set()
                await run
        finally:
            await pool.close()
            await conn.close()


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scenarios.wait_latency", description=__doc__
    )
    p.add_argument("--samples", type=int, default=200)
    add_dsn_option(p)
    ms = [x * 1000 for x in asyncio.run(amain(p.parse_args()))]
    print(
        f"venturi.wait, commit sent -> waiter returned ({len(ms)} samples): "
        f"p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms, "
        f"max {max(ms):.2f} ms, mean {statistics.mean(ms):.2f} ms"
    )


if __name__ == "__main__":
    main()
