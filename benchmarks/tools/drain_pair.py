"""An A/B of two venturi trees on the no-op drain alone, rounds alternating (A B, B A, ...)
in one sitting, with each side's CPU per job (issue 38).

    python -m benchmarks.tools.drain_pair --a /tmp/ab/A --b /tmp/ab/B --levels 10,32 \\
        --rounds 6 --jobs 10000 --json benchmarks/results/x.json

Each tree is a directory holding a ``venturi/`` (``git archive <commit> venturi``); nothing
else of it is needed. Every measurement is one subprocess run with that tree first on
``sys.path``: it creates a database, applies **its tree's** schema, enqueues ``--jobs``
no-op jobs through its tree's ``enqueue_many``, ANALYZEs, CHECKPOINTs, then runs
``venturi.Worker(concurrency=c)`` on ``--loop`` (uvloop by default) until the last job's
handler started, and drops the database. So trees whose enqueue statements or schema
differ (the commits of a bisect) each run their own. Figures, as ``benchmarks.compare``
takes them: jobs/s = (jobs - 1) / (last handler start - first handler start), CPU us per
job = the process's user+system CPU between those two instants / (jobs - 1), commits per
job = the database's ``xact_commit`` over the drain / jobs (round trips that end a
transaction: the load does not move it). The load average is printed with each round.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# One measurement, run with the tree on PYTHONPATH; argv[1] is its JSON spec.
_CHILD = r"""
import asyncio, json, os, resource, sys, time
import asyncpg, msgspec
import venturi
from venturi import db

spec = json.loads(sys.argv[1])
N = spec["jobs"]

class Noop(msgspec.Struct):
    i: int

seen = {"n": 0, "t0": None, "c0": None, "t1": None, "c1": None}
stop = None

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

@venturi.task(kind="pair_noop")
async def noop(ctx, carry: Noop) -> None:
    seen["n"] += 1
    if seen["n"] == 1:
        seen["t0"], seen["c0"] = time.monotonic(), cpu()
    if seen["n"] == N:
        seen["t1"], seen["c1"] = time.monotonic(), cpu()
        stop.set()

# This script runs in each tree under test, old ones too (which have none of this tree's
# benchmarks.sql), so its few statements are written here: the one place in benchmarks/.
async def main():
    global stop
    stop = asyncio.Event()
    admin = await asyncpg.connect(spec["admin"])
    name = spec["db"]
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    dsn = spec["admin"].rsplit("/", 1)[0] + "/" + name
    try:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema="venturi")
        for start in range(0, N, 1000):
            await venturi.enqueue_many(
                conn, [noop.job(Noop(i)) for i in range(start, min(N, start + 1000))]
            )
        await conn.execute("ANALYZE")
        await conn.execute("CHECKPOINT")
        await conn.close()
        # Exited backends flush their statistics: commits per job, which load does not move.
        await asyncio.sleep(0.5)
        commits = "SELECT xact_commit FROM pg_stat_database WHERE datname = $1"
        before = await admin.fetchval(commits, name)
        worker = venturi.Worker(None, dsn, [noop], concurrency=spec["concurrency"])
        run = asyncio.create_task(worker.run(stop))
        asyncio.get_running_loop().call_later(spec["timeout"], stop.set)
        await run
        await asyncio.sleep(0.5)
        after = await admin.fetchval(commits, name)
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()
    n = seen["n"]
    window = (seen["t1"] or 0) - (seen["t0"] or 0)
    out = {
        "venturi": os.path.dirname(venturi.__file__),
        "jobs": n,
        "complete": seen["t1"] is not None,
        "jobs_per_s": (N - 1) / window if seen["t1"] else None,
        "cpu_us_per_job": (seen["c1"] - seen["c0"]) / (N - 1) * 1e6 if seen["t1"] else None,
        "commits_per_job": (after - before) / N,
    }
    print(json.dumps(out))

if spec["loop"] == "uvloop":
    import uvloop
    uvloop.run(main())
else:
    asyncio.run(main())
"""


def measure(tree: Path, level: int, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    spec = {
        "admin": args.dsn,
        "db": f"bench_pair_{os.getpid()}_{tag}",
        "jobs": args.jobs,
        "concurrency": level,
        "loop": args.loop,
        "timeout": args.timeout,
    }
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(spec)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree} c={level} failed:\n{done.stderr[-3000:]}")
    r: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not r["venturi"].startswith(str(tree.resolve())):
        raise RuntimeError(f"{tree}: the child imported venturi from {r['venturi']}")
    if not r["complete"]:
        raise RuntimeError(f"{tree} c={level}: saw {r['jobs']} of {args.jobs} jobs")
    return r


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.drain_pair")
    p.add_argument("--a", required=True, type=Path)
    p.add_argument("--b", required=True, type=Path)
    p.add_argument("--a-rev", default="A")
    p.add_argument("--b-rev", default="B")
    p.add_argument("--levels", default="10,32", help="concurrencies, comma-separated")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument(
        "--dsn",
        default=os.environ.get(
            "VENTURI_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    args.a, args.b = args.a.resolve(), args.b.resolve()
    levels = [int(x) for x in args.levels.split(",")]
    sides = {"A": args.a, "B": args.b}
    got: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    loads: list[str] = []
    t0 = time.monotonic()
    for rnd in range(args.rounds):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        loads.append(load)
        order = ("A", "B") if rnd % 2 == 0 else ("B", "A")
        for level in levels:
            for side in order:
                r = measure(sides[side], level, args, side.lower())
                got[side].setdefault(f"c{level} jobs/s", []).append(r["jobs_per_s"])
                got[side].setdefault(f"c{level} cpu us/job", []).append(r["cpu_us_per_job"])
                got[side].setdefault(f"c{level} commits/job", []).append(r["commits_per_job"])
                print(
                    f"round {rnd + 1} c={level} {side}: {r['jobs_per_s']:,.0f} jobs/s, "
                    f"{r['cpu_us_per_job']:.1f} us/job, {r['commits_per_job']:.3f} commits/job "
                    f"(load {load})",
                    flush=True,
                )
    lines = [
        f"drain_pair: A = {args.a_rev}, B = {args.b_rev}, {args.rounds} rounds alternating, "
        f"{args.jobs:,} jobs, loop {args.loop}, {time.monotonic() - t0:.0f} s; "
        f"load at each round's start: {'; '.join(loads)}",
        f"{'figure':<18} {'A':>10} {'B':>10} {'B/A':>6}   rounds A | B",
    ]
    for key in got["A"]:
        a, b = got["A"][key], got["B"][key]
        ma, mb = statistics.median(a), statistics.median(b)
        each = " ".join(f"{x:,.3g}" for x in a) + " | " + " ".join(f"{x:,.3g}" for x in b)
        lines.append(f"{key:<18} {ma:>10,.3f} {mb:>10,.3f} {mb / ma:>6.2f}   {each}")
    text = "\n".join(lines)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "load_average": loads,
                    **got,
                    "summary": text,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
