"""Ten million pending (issue 16, target 4): bulk-load, then drain at c=32 from the big
table against the same drain from a small one.

    python -m benchmarks.scenarios.scale [--pending 10000000] [--drain 20000] [--rounds 5]
        [--json out.json]

Two databases of its own, the big table and the small one. Steps:

1. the big table: ``--pending`` jobs loaded by ``venturi.enqueue_many`` in calls of
   ``--load-batch`` (binary COPY), load rate reported; ANALYZE, CHECKPOINT; the plan of
   ``job_claim`` for 32 rows (EXPLAIN ANALYZE in a transaction rolled back, so it claims
   nothing);
2. ``--rounds`` rounds, each one drain per table, alternating (the small table first in
   odd rounds): a worker process (``benchmarks.worker_proc``, ``Worker(concurrency=32)``)
   drains ``--drain`` jobs from the big table; the small table is refilled to ``--small``
   (10,000) pending jobs, ANALYZEd and CHECKPOINTed, then drained (at most the table).
   A single drain takes about two seconds, so one pair swings far (79% and 164% in two
   runs of one pair each on 4d3cd92): the medians are compared;
3. the big table's and its indexes' sizes.

With ``--vacuum`` each table is vacuumed (``maintenance/job_vacuum``, as the Vacuum task
of ``venturi worker`` does past 20,000 dead row versions), ANALYZEd and CHECKPOINTed
before each of its drains, and the big table once after its load: without it the big
table carries the dead claim-index entries of every earlier drain (autovacuum's
threshold on it is 200,000 dead versions) while the small one is fresh each round.

The rate is (jobs - 1) / (last handler start - first handler start); the target is the
big table's median rate >= 80% of the small one's, the claim plan on ``jobs_claim_idx`` and
the worker's RSS under 60 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from benchmarks import ceiling, common
from benchmarks.common import add_dsn_option, create_database, drop_database, git_head, versions
from benchmarks.harness import run_worker
from benchmarks.sql import explain
from benchmarks.sql import statement as bsql
from benchmarks.systems.venturi import noop_jobs
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA


def log(msg: str) -> None:
    common.log(msg, "scale")


async def load(conn: Any, n: int, batch: int) -> float:
    """Enqueue ``n`` jobs in calls of ``batch``; seconds."""
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        rng = range(start, min(start + batch, n))
        await venturi.enqueue_many(conn, noop_jobs(rng))
        if start and start % (10 * batch) == 0:
            log(f"  loaded {start:,} ({start / (time.perf_counter() - t0):,.0f} jobs/s)")
    return time.perf_counter() - t0


async def prepare(conn: Any, vacuum: bool = False) -> None:
    if vacuum:
        # What the Vacuum task of `venturi worker` does past 20,000 dead row versions.
        await conn.execute(sql.statement("maintenance/job_vacuum", SCHEMA))
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    await conn.execute(bsql("checkpoint"))


async def drain(dsn: str, jobs: int, concurrency: int) -> dict[str, Any]:
    spec = {
        "system": "venturi",
        "dsn": dsn,
        "cfg": {"concurrency": concurrency},
        "mode": "drain",
        "target": jobs,
        "loop": "uvloop",
        "timeout": 600,
    }
    load_before = os.getloadavg()[0]
    r = await run_worker(spec)
    window = (r["t_target"] or r["t_last"]) - r["t_first"]
    return {
        "jobs": r["count"],
        "jobs_per_s": (r["count"] - 1) / window,
        "peak_rss_mb": r["maxrss_kb"] / 1024,
        "cut_short": r["t_target"] is None,
        "load_average": [load_before, os.getloadavg()[0]],
    }


async def claim_plan(conn: Any, limit: int) -> str:
    """EXPLAIN ANALYZE of ``job_claim`` for ``limit`` rows, rolled back."""
    names = ceiling.parameters("job_claim", SCHEMA)
    values = ceiling.claim_values(limit, "benchmarks.scenarios.scale")
    text = sql.statement("job_claim", SCHEMA)
    tx = conn.transaction()
    await tx.start()
    try:
        rows = await conn.fetch(
            explain(text, "ANALYZE, BUFFERS, COSTS OFF", "job_claim"),
            *ceiling.bind(names, values, "job_claim"),
        )
    finally:
        await tx.rollback()
    return "\n".join(r[0] for r in rows)


async def sizes(conn: Any) -> dict[str, int]:
    return dict(await conn.fetchrow(bsql("jobs_sizes", SCHEMA)))


def _summary(pending: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One table's drains: the median rate (the figure compared), every run, the peak RSS."""
    return {
        "pending": pending,
        "jobs_per_s": statistics.median(r["jobs_per_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "cut_short": any(r["cut_short"] for r in runs),
        "runs": runs,
    }


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    big_db, small_db = f"bench_scale_{os.getpid()}", f"bench_scale_small_{os.getpid()}"
    dsn = await create_database(args.dsn, big_db)
    small_dsn = await create_database(args.dsn, small_db)
    out: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        conn = await asyncpg.connect(dsn)
        small = await asyncpg.connect(small_dsn)
        for c in (conn, small):
            await db.schema.apply_schema(c, schema=SCHEMA)
        log(f"big table: loading {args.pending:,} jobs in calls of {args.load_batch:,}")
        load_before = os.getloadavg()[0]
        secs = await load(conn, args.pending, args.load_batch)
        out["load"] = {
            "jobs": args.pending,
            "seconds": secs,
            "jobs_per_s": args.pending / secs,
            "load_average": [load_before, os.getloadavg()[0]],
        }
        log(f"  loaded at {args.pending / secs:,.0f} jobs/s; ANALYZE, CHECKPOINT")
        await prepare(conn, args.vacuum)
        out["sizes_loaded"] = await sizes(conn)
        out["claim_plan"] = await claim_plan(conn, 32)
        log("  claim plan:\n" + out["claim_plan"])
        # The drains alternate, small table first in odd rounds, so the machine's drift
        # hits both alike; the small table is refilled to --small before each of its own.
        runs: dict[str, list[dict[str, Any]]] = {"small": [], "big": []}
        for rnd in range(args.rounds):
            for which in ("small", "big") if rnd % 2 == 0 else ("big", "small"):
                if which == "small":
                    await small.execute(bsql("jobs_empty", SCHEMA))
                    await load(small, args.small, args.load_batch)
                    await prepare(small, args.vacuum)
                    r = await drain(small_dsn, min(args.drain, args.small), 32)
                else:
                    if args.vacuum:
                        await prepare(conn, True)
                    r = await drain(dsn, args.drain, 32)
                runs[which].append(r)
                log(f"  round {rnd + 1} {which} table: drain {r['jobs_per_s']:,.0f} jobs/s")
        out["small"] = _summary(args.small, runs["small"])
        out["big"] = _summary(args.pending, runs["big"])
        out["ratio"] = out["big"]["jobs_per_s"] / out["small"]["jobs_per_s"]
        log(
            f"  medians: big {out['big']['jobs_per_s']:,.0f}, small "
            f"{out['small']['jobs_per_s']:,.0f} jobs/s ({out['ratio']:.0%}), worker peak RSS "
            f"{out['big']['peak_rss_mb']:.1f} MB"
        )
        out["sizes_drained"] = await sizes(conn)
        await conn.close()
        await small.close()
    finally:
        for name in (big_db, small_db):
            await drop_database(args.dsn, name)
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return out


def targets(out: dict[str, Any]) -> list[tuple[bool, str]]:
    plan = out["claim_plan"]
    return [
        (
            out["ratio"] >= 0.8,
            f"drain c=32 with {out['big']['pending']:,} pending >= 80% of "
            f"{out['small']['pending']:,}: {out['ratio']:.0%} ({out['big']['jobs_per_s']:,.0f} "
            f"vs {out['small']['jobs_per_s']:,.0f} jobs/s)",
        ),
        (
            "Index Scan using jobs_claim_idx" in plan and "Seq Scan on jobs" not in plan,
            "claim plan on jobs_claim_idx (EXPLAIN in the JSON)",
        ),
        (
            out["big"]["peak_rss_mb"] < 60,
            f"worker RSS under 60 MB: {out['big']['peak_rss_mb']:.1f} MB",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scenarios.scale", description=__doc__)
    add_dsn_option(p)
    p.add_argument("--pending", type=int, default=10_000_000)
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--drain", type=int, default=20_000)
    p.add_argument("--load-batch", type=int, default=100_000)
    p.add_argument(
        "--rounds", type=int, default=5, help="drains per table, alternating (median compared)"
    )
    p.add_argument(
        "--vacuum",
        action="store_true",
        help="vacuum each table before each of its drains (what `venturi worker` does)",
    )
    p.add_argument("--json")
    args = p.parse_args(argv)
    out = asyncio.run(amain(args))
    s = out["sizes_loaded"]
    print(
        f"venturi {out['commit']}: {args.pending:,} pending loaded at "
        f"{out['load']['jobs_per_s']:,.0f} jobs/s; table {s['heap'] / 2**20:,.0f} MB, "
        f"indexes {s['indexes'] / 2**20:,.0f} MB"
    )
    for met, what in targets(out):
        print(f"  {'MET   ' if met else 'MISSED'} {what}")
    out["targets"] = [{"met": m, "target": w} for m, w in targets(out)]
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
