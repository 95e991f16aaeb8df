"""A long job that checkpoints its carry with ``pause`` and survives a worker restart.

An import of 30 chunks runs in a worker process started with the real command line
(``venturi worker long_job_checkpoint:make_state``). The handler checkpoints every ten
chunks, and at once when the worker is asked to stop. This script stops the first
worker with SIGTERM part-way (a deploy, say), shows the checkpoint that is left in the
job's carry, starts a second worker, and that one resumes where the first stopped.
Each chunk is recorded idempotently, so a chunk done twice (after a crash between the
work and the checkpoint: delivery is at-least-once) is still counted once.

Run it against a database with the venturi schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/long_job_checkpoint.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import asyncpg
import msgspec

import venturi
from venturi import Context

CHUNKS = 30
CHECKPOINT_EVERY = 10
HERE = Path(__file__).resolve().parent


class Import(msgspec.Struct):
    """The carry: the import's position. Only a checkpoint (pause) writes it back."""

    file: str
    chunks: int
    done: int = 0


@dataclass
class App:
    pool: asyncpg.Pool


async def make_state() -> App:
    """The worker's state, built by `venturi worker long_job_checkpoint:make_state`."""
    return App(await asyncpg.create_pool(os.environ["VENTURI_DSN"], min_size=1, max_size=2))


@venturi.task(kind="example_import", lease=timedelta(minutes=1))
async def import_file(ctx: Context[App], carry: Import) -> venturi.Outcome:
    for chunk in range(carry.done, carry.chunks):
        await asyncio.sleep(0.05)  # the real work on one chunk
        await ctx.state.pool.execute(
            "INSERT INTO example_chunks (job_id, chunk, pid) VALUES ($1, $2, $3)"
            " ON CONFLICT (job_id, chunk) DO NOTHING",
            ctx.job.id,
            chunk,
            os.getpid(),
        )
        carry = Import(carry.file, carry.chunks, chunk + 1)
        if ctx.is_cancelled():
            # The worker is shutting down: checkpoint now, another worker resumes.
            return venturi.pause(carry)
        if carry.done % CHECKPOINT_EVERY == 0 and carry.done < carry.chunks:
            # A periodic checkpoint bounds what a crash (SIGKILL, power loss) redoes.
            return venturi.pause(carry)
    return venturi.complete({"file": carry.file, "chunks": carry.chunks})


async def start_worker(dsn: str) -> asyncio.subprocess.Process:
    """`venturi worker long_job_checkpoint:make_state`, run from this folder."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "worker",
        "long_job_checkpoint:make_state",
        "--dsn",
        dsn,
        "--concurrency",
        "1",
        cwd=HERE,
        env={**os.environ, "VENTURI_DSN": dsn},
    )


async def until(condition: Callable[[], Awaitable[bool]]) -> None:
    """Check ``condition`` every 50 ms until it holds: this script watches the workers
    from outside, through the database, so there is no event to wait on."""
    while True:
        if await condition():
            return
        await asyncio.sleep(0.05)


async def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS example_chunks ("
            " job_id bigint, chunk integer, pid integer, PRIMARY KEY (job_id, chunk))"
        )
        job_id = await import_file.enqueue(conn, Import("orders.csv", CHUNKS))
        print(f"enqueued import job {job_id}: {CHUNKS} chunks")

        async def chunks_done() -> int:
            return int(
                await conn.fetchval("SELECT count(*) FROM example_chunks WHERE job_id = $1", job_id)
            )

        async def past_the_first_checkpoint() -> bool:
            return await chunks_done() > CHECKPOINT_EVERY + 2

        first = await start_worker(dsn)
        await until(past_the_first_checkpoint)
        first.send_signal(signal.SIGTERM)  # a deploy: stop gracefully
        await first.wait()
        job = await venturi.get_job(conn, job_id)
        assert job is not None
        print(
            f"first worker stopped (exit {first.returncode}); job is {job.status} with "
            f"checkpoint done={job.carry['done']}"
        )
        assert job.status == "pending" and 0 < job.carry["done"] < CHUNKS

        async def finished() -> bool:
            job = await venturi.get_job(conn, job_id)
            return job is not None and job.status not in ("pending", "claimed")

        second = await start_worker(dsn)
        await until(finished)
        job = await venturi.get_job(conn, job_id)
        assert job is not None
        second.send_signal(signal.SIGTERM)
        await second.wait()

        rows = await conn.fetch(
            "SELECT pid, count(*) AS n, min(chunk) AS lo, max(chunk) AS hi"
            " FROM example_chunks WHERE job_id = $1 GROUP BY pid ORDER BY lo",
            job_id,
        )
        for r in rows:
            print(f"  worker pid {r['pid']}: chunks {r['lo']}-{r['hi']} ({r['n']})")
        journal = await venturi.get_journal(conn, job_id)
        workers = {e.worker for e in journal if e.event == "claimed"}
        print(f"job {job_id} is {job.status}: result {job.result}")
        print(f"claims: {sum(e.event == 'claimed' for e in journal)} by {len(workers)} workers")
        assert job.status == "completed" and await chunks_done() == CHUNKS
        assert len(rows) == 2 and len(workers) == 2
        print("ok: every chunk once, across a restart")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
