"""The upgrade to the history table on a database of a million finished jobs (issue 27):
how long the migration holds its locks, how long each batch of the move holds its own,
and that no job or journal row is lost or changed.

    python -m benchmarks.history_move [--jobs 1000000] [--batch 5000] [--json out.json]

One database of its own. Steps:
1. migrations 1 to 16 (the schema before the history table), ``--jobs`` jobs seeded as
   ``maintenance/jobs_seed_bulk`` seeds them (94% completed, 2% dead, 1% cancelled, the
   rest pending or claimed) with their journal, VACUUM ANALYZE, and a digest of every job
   and journal row (count and md5 of their text);
2. the upgrade (``apply_schema``: migration 17), timed: it is catalog changes only;
3. the move, as the ``History`` maintenance task runs it: ``job_history_move`` of
   ``--batch`` rows per statement until a batch comes back short, each statement its own
   transaction, each timed (a batch's row locks and its share of the table are held for
   that long and no longer). Beside it a probe enqueues a job, claims it and completes it
   every 20 ms on its own connection, the worker's path on the live table, and records how
   long each round took;
4. the digest again, through ``all_jobs``: it must be equal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import systems
from benchmarks.compare import DEFAULT_ADMIN_DSN, git_head, versions
from tests.support.sql import statement as tsql
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA


def log(msg: str) -> None:
    sys.stderr.write(f"[history_move {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


async def probe(dsn: str, stop: asyncio.Event, rounds: list[float]) -> None:
    """The worker's path on the live table while the move runs: enqueue, claim, complete."""
    conn = await asyncpg.connect(dsn)
    me = db.Claimant("probe:1")
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            await systems.venturi_noop.enqueue(conn, systems.Noop(0))
            claimed = await db.claims.job_claim(
                conn,
                schema=SCHEMA,
                claimant=me,
                kinds=[systems.venturi_noop.kind],
                leases=[60.0],
                floor=0,
                limit=1,
            )
            for row in claimed.claimed:
                await db.settle.job_complete_many_if_owned(
                    conn,
                    schema=SCHEMA,
                    claimant=me,
                    ids=[row["id"]],
                    attempts=[row["attempt"]],
                    results=[None],
                )
            rounds.append(time.perf_counter() - t0)
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "p50_ms": 1000 * statistics.median(xs),
        "p99_ms": 1000 * xs[min(len(xs) - 1, int(0.99 * len(xs)))],
        "max_ms": 1000 * xs[-1],
    }


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    admin = await asyncpg.connect(args.dsn)
    database = f"bench_history_{os.getpid()}"
    await admin.execute(sql.database_statement("database_create", database))
    dsn = args.dsn.rsplit("/", 1)[0] + "/" + database
    out: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "jobs": args.jobs,
        "batch": args.batch,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        conn = await asyncpg.connect(dsn)
        for m in sql.migrations():
            if m.version > 16:
                break
            await conn.execute(m.sql)
            await conn.execute(sql.statement("schema_version_record"), m.version, m.name)
        log(f"seeding {args.jobs:,} jobs at schema 16")
        await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), args.jobs, 86_400.0)
        await conn.execute(sql.statement("maintenance/journal_seed_bulk"))
        before = dict(await conn.fetchrow(tsql("jobs_digest_live"), None))
        upto = (await conn.fetchrow(sql.statement("job_ids_draw"), 1))["ids"][0]
        out["before"] = before
        log(f"  {before['jobs']:,} jobs, {before['journal']:,} journal rows; upgrading")
        t0 = time.perf_counter()
        applied = await db.schema.apply_schema(conn, schema=SCHEMA)
        out["migration"] = {"applied": applied, "seconds": time.perf_counter() - t0}
        log(f"  migration {applied}: {out['migration']['seconds'] * 1000:.0f} ms; VACUUM ANALYZE")
        await conn.execute(sql.statement("maintenance/vacuum_analyze"))

        stop = asyncio.Event()
        rounds: list[float] = []
        prober = asyncio.create_task(probe(dsn, stop, rounds))
        await asyncio.sleep(1.0)  # the probe's rounds before the move, for comparison
        before_move = len(rounds)
        batches: list[float] = []
        moved = 0
        load = [os.getloadavg()[0]]
        t_move = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            n = await db.operations.job_history_move(
                conn, schema=SCHEMA, after=0.0, batch=args.batch
            )
            batches.append(time.perf_counter() - t0)
            moved += n
            if len(batches) % 20 == 0:
                log(f"  moved {moved:,} ({moved / (time.perf_counter() - t_move):,.0f} jobs/s)")
            if n < args.batch:
                break
        move_secs = time.perf_counter() - t_move
        load.append(os.getloadavg()[0])
        stop.set()
        await prober
        out["move"] = {
            "moved": moved,
            "seconds": move_secs,
            "jobs_per_s": moved / move_secs,
            "batches": summary(batches),
            "load_average": load,
        }
        out["probe_before"] = summary(rounds[:before_move])
        out["probe_during"] = summary(rounds[before_move:])
        # The probe's own jobs came after: the digest of the jobs that were there before.
        after = dict(await conn.fetchrow(tsql("jobs_digest"), upto))
        out["after"] = after
        out["same"] = after == before
        out["where"] = dict(await conn.fetchrow(tsql("jobs_where")))
        log(f"  same jobs and journal after the move: {out['same']}; {out['where']}")
        await conn.close()
    finally:
        await admin.execute(sql.database_statement("database_drop", database))
        await admin.close()
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.history_move", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=5000)
    p.add_argument("--json")
    args = p.parse_args(argv)
    out = asyncio.run(amain(args))
    print(json.dumps(out, indent=2, default=str))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
