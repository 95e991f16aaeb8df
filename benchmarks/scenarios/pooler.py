"""Workers behind PgBouncer (issue 16, target 6): many worker processes through a small
server pool, against the same workers on direct connections.

    python -m benchmarks.scenarios.pooler [--processes 32] [--concurrency 4] [--pool 10]
                                          [--jobs 100000] [--json out.json]

It starts Debian's pgbouncer (``tests/support/pgbouncer.py``: transaction pooling, trust,
a loopback port, at most ``--pool`` server connections), creates a database of its own
and, for each configuration, starts ``--processes`` worker processes at ``--concurrency``
with an empty queue, waits until every one has been round its loop, enqueues ``--jobs``
no-op jobs in one transaction (so they become visible at once and one notification
wakes every worker) and waits until all are completed. The rate is (jobs - 1) / (the
last handler start - the first, over all processes, CLOCK_MONOTONIC). Every job must
run once: the handlers' runs, summed over the processes, must equal the jobs, all of
them completed.

Configurations:
- ``pooled+listen``: main DSN through the pooler (``pooler=transaction``), LISTEN on a
  direct connection (``listen_dsn``): pool + one connection per process on the server;
- ``pooled-poll``: through the pooler, no ``listen_dsn``: the workers poll every second;
- ``direct``: every connection direct (up to 3 per process). Run only if the server has
  room for them beside what is already connected (``max_connections``), else with
  as many processes as fit, which the report says.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import asyncpg

import venturi
from benchmarks import common, probe
from benchmarks.common import ROOT, add_dsn_option, git_head, scratch_database, versions, write_json
from benchmarks.sql import statement as bsql
from benchmarks.systems.venturi import noop_jobs, venturi_noop
from tests.support import pgbouncer
from venturi import db, sql

# Server connections a worker process opens at most on direct connections: the loop's,
# LISTEN's, the heartbeat's (Worker's own pool has max_size=3).
DIRECT_PER_PROCESS = 3
# Connections left free for everything else on the server (other sessions, superuser).
HEADROOM = 20


def log(msg: str) -> None:
    common.log(msg, "pooler")


# --- the worker process -----------------------------------------------------------


async def _worker_main(spec: dict[str, Any]) -> dict[str, Any]:
    stop = asyncio.Event()
    seen = probe.Probe(0, stop, echo=False)
    probe.install(seen, seen.begin)
    loop = asyncio.get_running_loop()

    def watch_stdin() -> None:
        sys.stdin.readline()  # "go away": the harness closes our stdin
        with contextlib.suppress(Exception):
            sys.stdin.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    worker = venturi.Worker(
        None,
        spec["dsn"],
        [venturi_noop],
        concurrency=spec["concurrency"],
        poll_max=spec.get("poll_max", 30.0),
        listen_dsn=spec.get("listen_dsn"),
    )
    run = asyncio.create_task(worker.run(stop))
    # Ready once the loop has found the queue empty: stats are counters, not events.
    while worker.stats["empty_claims"] < 1 and not run.done():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    if run.done():
        run.result()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await run
    return {
        "count": seen.count,
        "t_first": seen.t_first,
        "t_last": seen.t_last,
        "stats": dict(worker.stats),
    }


def _worker(spec: str) -> None:
    import uvloop

    result = uvloop.run(_worker_main(json.loads(spec)))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# --- the harness ------------------------------------------------------------------


async def _server_room(admin: str) -> int:
    conn = await asyncpg.connect(admin)
    try:
        return int(await conn.fetchval(bsql("server_connection_room"))) - HEADROOM
    finally:
        await conn.close()


async def _peak_connections(conn: Any, database: str, done: asyncio.Event, peak: list[int]) -> None:
    while not done.is_set():
        n = await conn.fetchval(bsql("database_sessions"), database)
        peak[0] = max(peak[0], int(n))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 0.2)


async def start_workers(name: str, spec: dict[str, Any], processes: int) -> list[Any]:
    """``processes`` worker processes (this module's ``_worker``), each ready: its loop
    has found the queue empty."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.scenarios.pooler",
            "_worker",
            json.dumps(spec),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None
        line = await asyncio.wait_for(p.stdout.readline(), 120)
        if line.strip() != b"ready":
            raise RuntimeError(f"{name}: a worker process did not start: {line!r}")
    return procs


async def stop_workers(procs: list[Any]) -> list[dict[str, Any]]:
    """Close each worker's stdin (its signal to stop); their final reports."""
    results = []
    for p in procs:
        assert p.stdin is not None
        with contextlib.suppress(Exception):
            p.stdin.close()
    for p in procs:
        out, _ = await asyncio.wait_for(p.communicate(), 120)
        lines = out.decode().strip().splitlines()
        results.append(json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {})
    return results


async def run_config(
    conn: Any,
    direct: str,
    database: str,
    name: str,
    dsn: str,
    listen_dsn: str | None,
    processes: int,
    concurrency: int,
    jobs: int,
    limit_s: float,
) -> dict[str, Any]:
    await conn.execute(bsql("jobs_empty"))
    await conn.execute(bsql("checkpoint"))
    spec = {"dsn": dsn, "listen_dsn": listen_dsn, "concurrency": concurrency, "poll_max": 30.0}
    log(f"{name}: starting {processes} worker processes at concurrency {concurrency}")
    procs = await start_workers(name, spec, processes)
    try:
        log(f"{name}: all ready; enqueueing {jobs:,} jobs in one transaction")
        load = os.getloadavg()
        done, peak = asyncio.Event(), [0]
        observer = await asyncpg.connect(direct)
        watcher = asyncio.create_task(_peak_connections(observer, database, done, peak))
        t_enqueue = time.monotonic()
        async with conn.transaction():
            for start in range(0, jobs, 10_000):
                await venturi.enqueue_many(conn, noop_jobs(range(start, min(start + 10_000, jobs))))
        t_committed = time.monotonic()
        deadline = t_committed + limit_s
        completed = 0
        while time.monotonic() < deadline:
            counts = await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA)
            by = {r["status"]: r["jobs"] for r in counts}
            completed = by.get("completed", 0)
            if completed >= jobs:
                break
            await asyncio.sleep(0.2)
        done.set()
        await watcher
        await observer.close()
        load_after = os.getloadavg()
    finally:
        results = await stop_workers(procs)
    ran = sum(r.get("count", 0) for r in results)
    firsts = [r["t_first"] for r in results if r.get("t_first")]
    lasts = [r["t_last"] for r in results if r.get("t_last")]
    window = max(lasts) - min(firsts) if firsts else None
    rate = (ran - 1) / window if window else None
    out = {
        "config": name,
        "processes": processes,
        "concurrency": concurrency,
        "jobs": jobs,
        "completed": completed,
        "runs": ran,
        "every_job_once": completed == jobs and ran == jobs,
        "jobs_per_s": rate,
        "window_s": window,
        "enqueue_s": t_committed - t_enqueue,
        "first_start_after_commit_s": (min(firsts) - t_committed) if firsts else None,
        "processes_that_ran_jobs": sum(1 for r in results if r.get("count")),
        "peak_server_connections": peak[0],
        "db_errors": sum(r.get("stats", {}).get("db_errors", 0) for r in results),
        "load_average_before": load,
        "load_average_after": load_after,
    }
    log(
        f"{name}: {fmt_rate(rate)} jobs/s, every job once: {out['every_job_once']} "
        f"(runs {ran:,}, completed {completed:,}), peak server connections {peak[0]}, "
        f"load {load[0]:.2f} -> {load_after[0]:.2f}"
    )
    return out


def fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    admin = args.dsn
    database = f"bench_pooler_{os.getpid()}"
    results: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [],
    }
    async with scratch_database(admin, database) as direct:
        conn = await asyncpg.connect(direct)
        await db.schema.apply_schema(conn, schema=sql.DEFAULT_SCHEMA)
        with pgbouncer.running(
            admin, pool_size=args.pool, max_clients=4 * args.processes + 50
        ) as b:
            pooled = b.through(direct)
            for round_ in range(args.repeat):
                configs: list[tuple[str, str, str | None, int]] = [
                    ("pooled+listen", pooled, direct, args.processes),
                    ("pooled-poll", pooled, None, args.processes),
                ]
                room = await _server_room(admin)
                fit = min(args.processes, room // DIRECT_PER_PROCESS)
                if "direct" in args.configs and fit >= 1:
                    configs.append(("direct", direct, None, fit))
                for name, dsn, listen, procs in configs:
                    if name not in args.configs:
                        continue
                    r = await run_config(
                        conn,
                        direct,
                        database,
                        name,
                        dsn,
                        listen,
                        procs,
                        args.concurrency,
                        args.jobs,
                        args.timeout,
                    )
                    r["round"] = round_ + 1
                    results["runs"].append(r)
        await conn.close()
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"venturi {results['commit']} behind pgbouncer (transaction pooling, "
        f"{results['args']['pool']} server connections): {results['args']['jobs']:,} jobs",
        "",
        "config          round  procs x c  jobs/s   every job once  peak conns  load 1m",
    ]
    for r in results["runs"]:
        lines.append(
            f"{r['config']:<15} {r['round']:>5}  {r['processes']:>3} x {r['concurrency']:<3} "
            f"{fmt_rate(r['jobs_per_s']):>7}   {r['every_job_once']!s:<14}  "
            f"{r['peak_server_connections']:>10}  "
            f"{r['load_average_before'][0]:.2f}-{r['load_average_after'][0]:.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":
        _worker(argv[1])
        return 0
    p = argparse.ArgumentParser(prog="python -m benchmarks.scenarios.pooler", description=__doc__)
    add_dsn_option(p)
    p.add_argument("--processes", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--pool", type=int, default=10, help="pgbouncer's server connections")
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--configs",
        default="pooled+listen,pooled-poll,direct",
        type=lambda s: [c.strip() for c in s.split(",") if c.strip()],
    )
    p.add_argument("--json", help="write every figure here")
    args = p.parse_args(argv)
    if pgbouncer.binary() is None:
        sys.stderr.write("pgbouncer is not installed (Debian: apt-get install pgbouncer)\n")
        return 2
    results = asyncio.run(amain(args))
    print(report(results))
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
