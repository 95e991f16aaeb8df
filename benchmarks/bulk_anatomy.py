"""Where a bulk enqueue's time goes (issue 27): the server's and the client's CPU per job,
with the live table as it is and without the parts the enqueue feeds.

    python -m benchmarks.bulk_anatomy [--rounds 2] [--calls 40] [--json out.json]

One database of its own, schema applied; per variant and round: ``TRUNCATE``, the
variant's drops, ``VACUUM``, ``CHECKPOINT``, one warm-up call, then ``--calls`` calls of
``venturi.enqueue_many`` of 1,000 no-op jobs on one connection (each its own
transaction, the jobs built in the loop as an application builds them). Figures per job:
the wall time, the server backend's CPU (``utime + stime`` from ``/proc``, so the server
must run on this machine) and the client process's CPU (``time.process_time``). The
variants drop ``jobs_kind_id_idx``, ``jobs_next_visible_idx``, the insert's notify
trigger, or all three: what each part of the enqueue costs, not a configuration to run
(the worker and the dashboard need all three). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

import asyncpg

import venturi
from benchmarks import save_run, systems
from benchmarks.index_cost import backend_cpu
from benchmarks.profile import DEFAULT_ADMIN_DSN, _database
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA
DROPS = {
    "jobs_kind_id_idx": f"DROP INDEX {SCHEMA}.jobs_kind_id_idx",
    "jobs_next_visible_idx": f"DROP INDEX {SCHEMA}.jobs_next_visible_idx",
    "notify trigger": f"DROP TRIGGER jobs_notify_insert ON {SCHEMA}.jobs",
}
VARIANTS = {
    "full schema": [],
    **{f"without {name}": [name] for name in DROPS},
    "without all three": list(DROPS),
}


async def restore_statements(dsn: str) -> list[str]:
    """The statements that put back what a variant drops (read from the fresh schema)."""
    conn = await asyncpg.connect(dsn)
    try:
        defs = {
            r["indexname"]: r["indexdef"].replace(" INDEX ", " INDEX IF NOT EXISTS ", 1)
            for r in await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = $1 AND tablename = 'jobs'",
                SCHEMA,
            )
        }
        trigger = await conn.fetchval(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'jobs_notify_insert'"
        )
    finally:
        await conn.close()
    return [
        defs["jobs_kind_id_idx"],
        defs["jobs_next_visible_idx"],
        f"DROP TRIGGER IF EXISTS jobs_notify_insert ON {SCHEMA}.jobs",
        trigger,
    ]


async def variant(dsn: str, restore: list[str], drop: list[str], calls: int) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"TRUNCATE {SCHEMA}.jobs CASCADE")
        for statement in restore + [DROPS[d] for d in drop]:
            await conn.execute(statement)
        await conn.execute(f"VACUUM {SCHEMA}.jobs")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    conn = await asyncpg.connect(dsn)  # a fresh session: nothing planned before the DDL
    try:
        pid = conn.get_server_pid()

        async def call() -> None:
            jobs = [systems.venturi_noop.job(systems.Noop(i)) for i in range(1_000)]
            await venturi.enqueue_many(conn, jobs)

        await call()
        server0, client0, wall0 = backend_cpu(pid), time.process_time(), time.monotonic()
        for _ in range(calls):
            await call()
        wall = time.monotonic() - wall0
        n = calls * 1_000
        return {
            "jobs_per_s": n / wall,
            "wall_us": wall / n * 1e6,
            "server_us": (backend_cpu(pid) - server0) / n * 1e6,
            "client_us": (time.process_time() - client0) / n * 1e6,
        }
    finally:
        await conn.close()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    dsn = await _database(args.dsn, f"bench_bulk_anatomy_{os.getpid()}", create=True)
    conn = await asyncpg.connect(dsn)
    try:
        await db.schema.apply_schema(conn, schema=SCHEMA)
    finally:
        await conn.close()
    restore = await restore_statements(dsn)
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    loads = [os.getloadavg()[0]]
    try:
        for rnd in range(args.rounds):
            for name, drop in VARIANTS.items():
                r = await variant(dsn, restore, drop, args.calls)
                runs[name].append(r)
                print(
                    f"round {rnd + 1} {name:32s} {r['jobs_per_s']:9,.0f} jobs/s  wall "
                    f"{r['wall_us']:5.1f}  server {r['server_us']:5.1f}  client "
                    f"{r['client_us']:5.1f} us/job",
                    file=sys.stderr,
                    flush=True,
                )
            loads.append(os.getloadavg()[0])
    finally:
        await _database(args.dsn, f"bench_bulk_anatomy_{os.getpid()}", create=False)
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    return {"runs": runs, "medians": medians, "loads": loads, "calls": args.calls}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bulk_anatomy")
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--json")
    args = p.parse_args(argv)
    result = asyncio.run(amain(args))
    lines = [f"medians of {args.rounds} rounds, {args.calls} calls of 1,000 each; us per job"]
    lines.append(f"{'variant':32s} {'jobs/s':>9s} {'wall':>6s} {'server':>6s} {'client':>6s}")
    for name, m in result["medians"].items():
        lines.append(
            f"{name:32s} {m['jobs_per_s']:9,.0f} {m['wall_us']:6.1f} {m['server_us']:6.1f} "
            f"{m['client_us']:6.1f}"
        )
    lines.append("load average: " + ", ".join(f"{x:.2f}" for x in result["loads"]))
    print("\n".join(lines))
    if args.json:
        save_run(args.json, result, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
