"""Two claim loops in one worker process against one (issue 16, target 1): is a second
claim statement in flight worth it at c=10?

    python -m benchmarks.lanes [--jobs 20000] [--repeat 3] [--json out.json]

The same process drains ``--jobs`` no-op jobs (ANALYZEd, after a CHECKPOINT) with
``Worker(concurrency=10)`` (one claim in flight) and with a ``WorkerGroup`` of two
``Worker(concurrency=5)`` sharing the slots (two claims in flight, each on its own
connection), alternating. The rate is (jobs - 1) / (last handler start - first).
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

import venturi
from benchmarks import systems
from benchmarks.compare import DEFAULT_ADMIN_DSN, git_head
from venturi import db, sql


class _Probe:
    def __init__(self, target: int, stop: asyncio.Event) -> None:
        self.target, self.stop = target, stop
        self.count, self.first, self.last = 0, 0.0, 0.0

    def __call__(self, _i: int) -> None:
        now = time.monotonic()
        if self.count == 0:
            self.first = now
        self.count += 1
        self.last = now
        if self.count >= self.target:
            self.stop.set()


async def drain(dsn: str, conn: Any, jobs: int, lanes: int, concurrency: int) -> float:
    await conn.execute(f"TRUNCATE {sql.DEFAULT_SCHEMA}.jobs, {sql.DEFAULT_SCHEMA}.journal CASCADE")
    for start in range(0, jobs, 10_000):
        batch = range(start, min(start + 10_000, jobs))
        await venturi.enqueue_many(conn, [systems.venturi_noop.job(systems.Noop(i)) for i in batch])
    await conn.execute(sql.statement("maintenance/analyze", sql.DEFAULT_SCHEMA))
    await conn.execute("CHECKPOINT")
    stop = asyncio.Event()
    probe = _Probe(jobs, stop)
    systems.set_probe(probe)
    each = concurrency // lanes
    workers = [
        venturi.Worker(None, dsn, [systems.venturi_noop], concurrency=each) for _ in range(lanes)
    ]
    runner: Any = workers[0] if lanes == 1 else venturi.WorkerGroup(workers)
    await asyncio.wait_for(runner.run(stop), 600)
    return (probe.count - 1) / (probe.last - probe.first)


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    database = f"bench_lanes_{os.getpid()}"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f"CREATE DATABASE {database}")
    from venturi.testing.server import with_database

    dsn = with_database(args.dsn, database)
    out: dict[str, Any] = {"commit": git_head(), "args": vars(args), "runs": []}
    try:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=sql.DEFAULT_SCHEMA)
        shapes = [(1, args.concurrency), (2, args.concurrency)]
        for r in range(args.repeat):
            for lanes, c in shapes if r % 2 == 0 else shapes[::-1]:
                load = os.getloadavg()[0]
                rate = await drain(dsn, conn, args.jobs, lanes, c)
                sys.stderr.write(
                    f"[lanes] {lanes} loop(s) x c={c // lanes}: {rate:,.0f} jobs/s (load {load:.2f})\n"
                )
                out["runs"].append(
                    {"lanes": lanes, "concurrency": c, "jobs_per_s": rate, "load": load}
                )
        await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await admin.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lanes", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args(argv)
    import uvloop

    out = uvloop.run(amain(args))
    for lanes in (1, 2):
        rates = [r["jobs_per_s"] for r in out["runs"] if r["lanes"] == lanes]
        loads = [r["load"] for r in out["runs"] if r["lanes"] == lanes]
        print(
            f"{lanes} claim loop(s) x c={args.concurrency // lanes}: median {statistics.median(rates):,.0f} "
            f"jobs/s over {len(rates)} runs, load {min(loads):.2f}-{max(loads):.2f}"
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
