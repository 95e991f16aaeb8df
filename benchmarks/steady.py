"""The steady state (issue 16, target 5): enqueue and drain at a constant rate for a long
time, with retention running, and watch throughput, pickup and the table's size.

    python -m benchmarks.steady [--minutes 30] [--rate 0] [--json out.json] [--plot out.png]

One database of its own. The rate is ``--rate`` jobs/s, or (0) 70% of the maximum
measured first: a c=32 drain of 20,000 jobs, whose completed rows stay and are ANALYZEd
(``--fresh``: truncated instead, a table without statistics). Then, for ``--minutes``:

- a producer enqueues every 100 ms the jobs due by then (``venturi.enqueue_many``, one
  transaction per tick), so the offered rate stays constant;
- one worker process (``Worker(concurrency=32)``, ``benchmarks.worker_proc``) with a
  ``Retention`` that deletes completed jobs ``--retention`` seconds after they finish,
  checked every 10 s;
- every ``--sample`` seconds (60) the harness records, for the jobs claimed in that
  interval: how many were completed, their pickup p50/p99 (``claimed_at - created_at``,
  server clocks: from the enqueue's transaction to the claim's), and the sizes of the
  jobs table, its indexes and the journal, with the dead tuples and autovacuum runs
  (``pg_stat_user_tables``).

The targets: throughput per interval within 10% of the median (the first interval, the
warm-up, left out), and the table and index sizes bounded (the last third's maximum at
most 1.5x the first third's). ``--plot`` draws throughput, pickup p99 and sizes over time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
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
from benchmarks.compare import DEFAULT_ADMIN_DSN, ROOT, git_head, versions
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA
TICK = 0.1


def log(msg: str) -> None:
    sys.stderr.write(f"[steady {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _spec(dsn: str, target: int, timeout: float, retention: float | None) -> str:
    cfg: dict[str, Any] = {"concurrency": 32}
    if retention is not None:
        cfg["retention_s"] = retention
        cfg["retention_every"] = 10
    return json.dumps(
        {
            "system": "venturi",
            "dsn": dsn,
            "cfg": cfg,
            "mode": "drain",
            "target": target,
            "loop": "uvloop",
            "timeout": timeout,
        }
    )


async def _worker(spec: str) -> Any:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.worker_proc",
        spec,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
    )


async def measure_max(conn: Any, dsn: str, jobs: int = 20_000) -> float:
    for start in range(0, jobs, 10_000):
        batch = range(start, min(start + 10_000, jobs))
        await venturi.enqueue_many(conn, [systems.venturi_noop.job(systems.Noop(i)) for i in batch])
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    proc = await _worker(_spec(dsn, jobs, 300, None))
    out, _ = await proc.communicate()
    r = json.loads(out.decode().strip().splitlines()[-1])
    return float((r["count"] - 1) / ((r["t_target"] or r["t_last"]) - r["t_first"]))


async def produce(conn: Any, rate: float, until: float, sent: list[int]) -> None:
    start = time.monotonic()
    while (now := time.monotonic()) < until:
        due = int((now - start) * rate) - sent[0]
        if due > 0:
            first = sent[0]
            await venturi.enqueue_many(
                conn, [systems.venturi_noop.job(systems.Noop(first + k)) for k in range(due)]
            )
            sent[0] += due
        await asyncio.sleep(
            max(0.0, start + (int((now - start) / TICK) + 1) * TICK - time.monotonic())
        )


async def vacuum(dsn: str, every: float, until: float, runs: list[float]) -> None:
    """VACUUM (ANALYZE) the queue tables every ``every`` seconds: autovacuum's work, for a
    server that has autovacuum off (it is a cluster-wide setting)."""
    conn = await asyncpg.connect(dsn)
    try:
        while time.monotonic() + every < until:
            await asyncio.sleep(every)
            t0 = time.monotonic()
            await conn.execute(sql.statement("maintenance/vacuum_analyze", SCHEMA))
            runs.append(time.monotonic() - t0)
    finally:
        await conn.close()


async def sample(conn: Any, since: Any) -> dict[str, Any]:
    """The jobs claimed since ``since`` (a server timestamp) and the sizes now."""
    row = await conn.fetchrow(
        f"""
        SELECT now() AS at,
               count(*) FILTER (WHERE status = 'completed') AS completed,
               count(*) AS claimed,
               percentile_cont(0.5) WITHIN GROUP (
                   ORDER BY extract(epoch FROM claimed_at - created_at)) * 1000 AS p50_ms,
               percentile_cont(0.99) WITHIN GROUP (
                   ORDER BY extract(epoch FROM claimed_at - created_at)) * 1000 AS p99_ms
        FROM {SCHEMA}.jobs WHERE claimed_at >= $1 AND claimed_at < now()
        """,
        since,
    )
    sizes = await conn.fetchrow(
        f"""
        SELECT pg_relation_size('{SCHEMA}.jobs') AS jobs_heap,
               pg_indexes_size('{SCHEMA}.jobs') AS jobs_indexes,
               pg_total_relation_size('{SCHEMA}.journal') AS journal_total,
               s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.autoanalyze_count,
               s.n_tup_upd, s.n_tup_hot_upd,
               (SELECT count(*) FROM {SCHEMA}.jobs WHERE status = 'pending') AS pending,
               (SELECT count(*) FROM pg_stat_progress_vacuum v
                WHERE v.relid = '{SCHEMA}.jobs'::regclass) AS vacuuming
        FROM pg_stat_user_tables s WHERE s.relid = '{SCHEMA}.jobs'::regclass
        """
    )
    return {**dict(row), **dict(sizes)}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    database = f"bench_steady_{os.getpid()}"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f"CREATE DATABASE {database}")
    from venturi.testing.server import with_database

    dsn = with_database(args.dsn, database)
    out: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "samples": [],
    }
    try:
        conn = await asyncpg.connect(dsn)
        producer_conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=SCHEMA)
        rate = args.rate
        if args.maximum:
            out["max_jobs_per_s"] = args.maximum
        if not rate:
            top = await measure_max(conn, dsn)
            rate = 0.7 * top
            out["max_jobs_per_s"] = top
            log(f"maximum (c=32 drain of 20,000): {top:,.0f} jobs/s; running at {rate:,.0f}")
        out["rate"] = rate
        out["server_autovacuum"] = await conn.fetchval("SHOW autovacuum")
        if out["server_autovacuum"] != "on" and not args.vacuum_every:
            log("! the server runs with autovacuum = off: nothing vacuums the queue table")
        if args.table_settings:
            # An A/B of the queue table's storage parameters (autovacuum, fillfactor).
            await conn.execute(f"ALTER TABLE {SCHEMA}.jobs SET ({args.table_settings})")
        out["table_options"] = await conn.fetchval(
            f"SELECT reloptions::text FROM pg_class WHERE oid = '{SCHEMA}.jobs'::regclass"
        )
        if args.fresh:
            # A queue table without statistics: the claim's plan until autovacuum's
            # first ANALYZE (benchmarks/README.md, finding 2).
            await conn.execute(f"TRUNCATE {SCHEMA}.jobs, {SCHEMA}.journal CASCADE")
        else:
            # The completed jobs of the measurement stay (retention deletes them) and
            # the statistics describe a queue that has run, as in production.
            await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
        duration = args.minutes * 60
        proc = await _worker(_spec(dsn, 10**12, duration + 10, args.retention))
        await asyncio.sleep(2)  # the worker starts up
        until = time.monotonic() + duration
        sent = [0]
        producer = asyncio.create_task(produce(producer_conn, rate, until, sent))
        vacuums: list[float] = []
        vacuumer = (
            asyncio.create_task(vacuum(dsn, args.vacuum_every, until, vacuums))
            if args.vacuum_every
            else None
        )
        since = await conn.fetchval("SELECT now()")
        while time.monotonic() < until:
            await asyncio.sleep(min(args.sample, max(0.0, until - time.monotonic())))
            s = await sample(conn, since)
            # Over the interval as the server's clock measured it: the intervals run a
            # little long (the sampling's own queries) and the last one is cut at the end.
            s["seconds"] = (s["at"] - since).total_seconds()
            since = s["at"]
            s["minute"] = len(out["samples"]) + 1
            s["sent"] = sent[0]
            s["load_average"] = os.getloadavg()[0]
            s["jobs_per_s"] = s["claimed"] / s["seconds"]
            s["harness_vacuums"] = len(vacuums)
            out["samples"].append(s)
            log(
                f"{s['minute']:>3}: {s['jobs_per_s']:,.0f} jobs/s claimed, pickup p50 "
                f"{s['p50_ms'] or 0:.1f} / p99 {s['p99_ms'] or 0:.1f} ms, pending {s['pending']:,}, "
                f"jobs {s['jobs_heap'] / 2**20:.1f} MB + indexes {s['jobs_indexes'] / 2**20:.1f} MB, "
                f"dead {s['n_dead_tup']:,}, autovacuums {s['autovacuum_count']} "
                f"(running: {s['vacuuming']}), harness vacuums {len(vacuums)}, "
                f"load {s['load_average']:.2f}"
            )
        await producer
        if vacuumer is not None:
            await vacuumer
        out["harness_vacuum_seconds"] = vacuums
        await proc.communicate()
        await producer_conn.close()
        await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await admin.close()
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    return out


def targets(out: dict[str, Any]) -> list[tuple[bool, str]]:
    samples = out["samples"][1:] or out["samples"]
    rates = [s["jobs_per_s"] for s in samples]
    med = statistics.median(rates)
    drift = max(abs(r - med) / med for r in rates) if med else float("inf")
    third = max(1, len(out["samples"]) // 3)
    first = max(s["jobs_heap"] + s["jobs_indexes"] for s in out["samples"][:third])
    last = max(s["jobs_heap"] + s["jobs_indexes"] for s in out["samples"][-third:])
    p99 = [s["p99_ms"] or 0 for s in samples]
    top = out.get("max_jobs_per_s")
    offered = []
    if top:
        offered = [
            (
                out["rate"] >= 0.65 * top,
                f"offered rate near 70% of the maximum: {out['rate']:,.0f} of {top:,.0f} "
                f"jobs/s ({out['rate'] / top:.0%})",
            )
        ]
    return [
        *offered,
        (
            drift <= 0.10,
            f"throughput per interval within 10% of its median ({med:,.0f} jobs/s at an "
            f"offered {out['rate']:,.0f}): largest deviation {drift:.1%}",
        ),
        (
            last <= 1.5 * first,
            f"jobs table + indexes bounded: {first / 2**20:.1f} MB (first third's max) -> "
            f"{last / 2**20:.1f} MB (last third's); pickup p99 per interval "
            f"{min(p99):.1f}-{max(p99):.1f} ms",
        ),
    ]


def rescore(out: dict[str, Any], maximum: float = 0) -> dict[str, Any]:
    """An earlier run's rates over its intervals as the server's clock measured them
    (runs before 2d91365 divided by the nominal ``--sample``, which made the last, cut
    interval look slow), and its targets again."""
    from datetime import datetime

    samples = out["samples"]
    for prev, s in itertools.pairwise(samples):
        gap = datetime.fromisoformat(s["at"]) - datetime.fromisoformat(prev["at"])
        s["seconds"] = gap.total_seconds()
        s["jobs_per_s"] = s["claimed"] / s["seconds"]
    if maximum:
        out["max_jobs_per_s"] = maximum
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    return out


def plot(out: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = out["samples"]
    t = [x["minute"] * out["args"]["sample"] / 60 for x in s]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    axes[0].plot(t, [x["jobs_per_s"] for x in s], marker="o")
    axes[0].axhline(out["rate"], linestyle="--", color="gray", label="offered")
    axes[0].set_ylabel("jobs/s claimed")
    axes[0].legend()
    axes[1].plot(t, [x["p99_ms"] or 0 for x in s], marker="o", label="p99")
    axes[1].plot(t, [x["p50_ms"] or 0 for x in s], marker=".", label="p50")
    axes[1].set_ylabel("pickup, ms")
    axes[1].legend()
    mb = 2**20
    axes[2].plot(t, [x["jobs_heap"] / mb for x in s], label="jobs heap")
    axes[2].plot(t, [x["jobs_indexes"] / mb for x in s], label="jobs indexes")
    axes[2].plot(t, [x["journal_total"] / mb for x in s], label="journal")
    axes[2].set_ylabel("MB")
    axes[2].set_xlabel("minutes")
    axes[2].legend()
    fig.suptitle(f"venturi {out['commit']}: steady state at {out['rate']:,.0f} jobs/s")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.steady", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--rate", type=float, default=0, help="jobs/s; 0: 70%% of the maximum")
    p.add_argument(
        "--maximum",
        type=float,
        default=0,
        help="with --rate: the maximum measured by an earlier run (jobs/s), for the report",
    )
    p.add_argument("--retention", type=float, default=120, help="seconds completed jobs stay")
    p.add_argument("--sample", type=float, default=60, help="seconds per interval")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start from a truncated table without statistics (default: ANALYZEd after "
        "the maximum's drain)",
    )
    p.add_argument(
        "--table-settings",
        default="",
        help="storage parameters set on the jobs table first, e.g. "
        "'autovacuum_vacuum_cost_delay = 0'",
    )
    p.add_argument(
        "--vacuum-every",
        type=float,
        default=0,
        help="seconds between VACUUM (ANALYZE) runs of the jobs table by the harness, "
        "standing in for autovacuum where the server has it off",
    )
    p.add_argument("--json")
    p.add_argument("--plot", help="a PNG of throughput, pickup p99 and sizes over time")
    p.add_argument(
        "--rescore",
        metavar="JSON",
        help="recompute an earlier run's rates from its samples' server timestamps and its "
        "targets (with --maximum if given), rewrite the JSON, print; runs nothing",
    )
    args = p.parse_args(argv)
    if args.rescore:
        out = rescore(json.loads(Path(args.rescore).read_text()), args.maximum)
        args.json = args.json or args.rescore
    else:
        out = asyncio.run(amain(args))
    for met, what in targets(out):
        print(f"  {'MET   ' if met else 'MISSED'} {what}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    if args.plot:
        plot(out, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
