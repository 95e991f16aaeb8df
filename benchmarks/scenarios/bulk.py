"""Bulk enqueue (issue 16, target 3): ``venturi.enqueue_many`` by binary COPY against its
INSERT ... unnest path and against a raw COPY of the same rows.

    python -m benchmarks.scenarios.bulk [--jobs 1000000] [--calls-of 1000,5000,20000] [--json out]

One database of its own; each measurement starts from an empty, CHECKPOINTed table, and
the paths alternate (A B A B ...) so that drift on the machine hits both alike.

- ``enqueue_many (copy)``: ``venturi.enqueue_many`` with the library's threshold
  (``db.enqueue.COPY_MIN_ROWS``): calls at or above it go by COPY;
- ``enqueue_many (insert)``: the same calls with the threshold out of reach, so every call
  is one ``job_insert_many_unkeyed`` (the path before COPY);
- ``raw COPY``: asyncpg ``copy_records_to_table`` of the rows the COPY path writes, built
  beforehand (ids drawn, clock read): the server's floor for these rows and indexes.

Payload building (``Task.job``) is inside the timing of both enqueue paths, as in
``benchmarks.compare``; every call is its own transaction.
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
from benchmarks import common
from benchmarks.common import add_dsn_option, git_head, scratch_database, versions, write_json
from benchmarks.sql import statement as bsql
from benchmarks.systems.venturi import noop_jobs
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA


def log(msg: str) -> None:
    common.log(msg, "bulk")


async def _empty(conn: Any) -> None:
    await conn.execute(bsql("jobs_empty", SCHEMA))
    await conn.execute(bsql("checkpoint"))


async def enqueue(conn: Any, jobs: int, per_call: int, path: str) -> float:
    """Seconds to enqueue ``jobs`` in calls of ``per_call`` by ``path``."""
    saved = db.enqueue.COPY_MIN_ROWS
    if path == "insert":
        db.enqueue.COPY_MIN_ROWS = jobs + 1
    try:
        t0 = time.perf_counter()
        for start in range(0, jobs, per_call):
            batch = range(start, min(start + per_call, jobs))
            await venturi.enqueue_many(conn, noop_jobs(batch))
        return time.perf_counter() - t0
    finally:
        db.enqueue.COPY_MIN_ROWS = saved


async def raw_copy(conn: Any, jobs: int) -> float:
    """Seconds of the COPY alone, of rows built before the clock starts."""
    specs = noop_jobs(range(jobs))
    async with conn.transaction():
        row = await conn.fetchrow(sql.statement("job_ids_draw", SCHEMA), jobs)
        now, ids = row["now"], row["ids"]
        # The columns after max_failures (the backoff's four, the trace context) are
        # NULL for a no-op job; padded to COPY_COLUMNS, which gained traceparent after
        # this script last ran (the raw path failed with "tuple index out of range").
        rest = (None,) * (len(db.enqueue.COPY_COLUMNS) - 6)
        records = [
            (i, s.kind, s.carry, s.priority, now, s.max_failures, *rest)
            for i, s in zip(ids, specs, strict=True)
        ]
        t0 = time.perf_counter()
        await conn.copy_records_to_table(
            "jobs", schema_name=SCHEMA, columns=db.enqueue.COPY_COLUMNS, records=records
        )
        return time.perf_counter() - t0


async def measure(conn: Any, args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    """Every shape and path, alternating, into ``runs``."""
    shapes = [(args.jobs, args.jobs)] + [(args.small_jobs, n) for n in args.calls_of]
    for jobs, per_call in shapes:
        paths = ["copy", "insert"] + (["raw"] if per_call == jobs else [])
        for round_ in range(args.repeat):
            for path in paths if round_ % 2 == 0 else paths[::-1]:
                await _empty(conn)
                load = os.getloadavg()[0]
                if path == "raw":
                    secs = await raw_copy(conn, jobs)
                else:
                    secs = await enqueue(conn, jobs, per_call, path)
                rate = jobs / secs
                log(
                    f"{jobs:,} jobs in calls of {per_call:,}, {path}: {rate:,.0f} jobs/s "
                    f"({secs:.2f} s, load {load:.2f})"
                )
                runs.append(
                    {
                        "jobs": jobs,
                        "per_call": per_call,
                        "path": path,
                        "round": round_ + 1,
                        "seconds": secs,
                        "jobs_per_s": rate,
                        "load_average": load,
                    }
                )


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "copy_min_rows": db.enqueue.COPY_MIN_ROWS,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [],
    }
    async with scratch_database(args.dsn, f"bench_bulk_{os.getpid()}") as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await db.schema.apply_schema(conn, schema=SCHEMA)
            await measure(conn, args, results["runs"])
        finally:
            await conn.close()
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"venturi {results['commit']}: bulk enqueue (COPY from {results['copy_min_rows']:,} "
        "jobs per call), median of the rounds",
        "",
        "jobs        per call   path     jobs/s    load 1m",
    ]
    groups: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for r in results["runs"]:
        groups.setdefault((r["jobs"], r["per_call"], r["path"]), []).append(r)
    for (jobs, per_call, path), runs in groups.items():
        rate = statistics.median(r["jobs_per_s"] for r in runs)
        loads = [r["load_average"] for r in runs]
        lines.append(
            f"{jobs:>9,}  {per_call:>9,}   {path:<7} {rate:>8,.0f}   "
            f"{min(loads):.2f}-{max(loads):.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scenarios.bulk", description=__doc__)
    add_dsn_option(p)
    p.add_argument("--jobs", type=int, default=1_000_000, help="jobs of the one-call run")
    p.add_argument("--small-jobs", type=int, default=100_000, help="jobs of the other runs")
    p.add_argument(
        "--calls-of",
        default=[1_000, 5_000, 20_000],
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
    )
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args(argv)
    results = asyncio.run(amain(args))
    print(report(results))
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
