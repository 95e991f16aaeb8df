"""Where a worker's CPU goes on the no-op drain (issue 38): one worker process of this
tree drains ``--jobs`` no-op jobs at ``--concurrency``, under a profiler.

    python -m benchmarks.tools.drain_profile --concurrency 32 --jobs 20000 --profiler pyspy \\
        --out /tmp/c32
    python -m benchmarks.tools.drain_profile --concurrency 32 --jobs 20000 --profiler cprofile \\
        --out /tmp/c32

The process fills its own database first (dropped at the end), then runs
``venturi.Worker`` on ``--loop`` (uvloop by default). ``pyspy`` samples the process from
outside (``py-spy record``, 250 Hz; the filling is left out by keeping only the samples
under ``Worker.run``) and prints the self time of the hottest functions and the
inclusive share of the per-job steps; ``cprofile`` runs the worker under cProfile
(deterministic, so small functions look dearer than they are, but its call counts per job
are exact) and prints calls per job and the hottest functions. ``none`` prints the CPU
per job alone. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

import venturi
from benchmarks.common import scratch_database
from venturi import db, sql

# Inclusive shares reported for py-spy: a frame whose function name holds the key.
STEPS = {
    "claim (job_claim, incl. the driver)": "job_claim (venturi/db/claims.py",
    "asyncpg protocol (all statements)": "asyncpg/protocol",
    "InFlight.start (Run, task creation)": "start (venturi/runtime/inflight.py",
    "run_handler (Context, handler, outcome)": "_run_handler (venturi/runtime/executor.py",
    "reap (ending, outcome)": "reap (venturi/runtime/inflight.py",
    "Completer.take/finish": "finish (venturi/runtime/completer.py",
    "statistics.after_claim": "after_claim (",
    "Loop.iterate": "iterate (venturi/runtime/loop.py",
    "heartbeat": "heartbeat.py",
    "recovery": "recovery.py",
}


# Samples of the filling and of imports: not the drain.
_NOT_THE_DRAIN = ("enqueue_many", "apply_schema", "_bootstrap")


class Noop(msgspec.Struct):
    i: int


seen = {"n": 0, "t0": 0.0, "c0": 0.0, "t1": 0.0, "c1": 0.0}
N = 0
stop: asyncio.Event


def _cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


@venturi.task(kind="profile_noop")
async def noop(ctx: venturi.Context[Any], carry: Noop) -> None:
    seen["n"] += 1
    if seen["n"] == 1:
        seen["t0"], seen["c0"] = time.monotonic(), _cpu()
    if seen["n"] == N:
        seen["t1"], seen["c1"] = time.monotonic(), _cpu()
        stop.set()


async def inner(args: argparse.Namespace) -> None:
    global stop, N
    stop, N = asyncio.Event(), args.jobs
    name = f"bench_profile_{os.getpid()}"
    prof = cProfile.Profile(time.process_time) if args.profiler == "cprofile" else None
    async with scratch_database(args.dsn, name) as dsn:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema="venturi")
        for start in range(0, N, 1000):
            await venturi.enqueue_many(
                conn, [noop.job(Noop(i)) for i in range(start, min(N, start + 1000))]
            )
        await conn.execute(sql.statement("maintenance/analyze"))
        await conn.close()
        worker = venturi.Worker(None, dsn, [noop], concurrency=args.concurrency)
        if prof is not None:
            prof.enable()
        await worker.run(stop)
        if prof is not None:
            prof.disable()
    n = N - 1
    figures = {
        "jobs_per_s": n / (seen["t1"] - seen["t0"]),
        "cpu_us_per_job": (seen["c1"] - seen["c0"]) / n * 1e6,
        "load": os.getloadavg(),
        "gc_collections": [g["collections"] for g in gc.get_stats()],
    }
    print(json.dumps(figures), flush=True)
    if prof is not None:
        prof.dump_stats(str(args.out) + ".prof")
        stats = pstats.Stats(prof)
        rows = []
        for (file, line, fn), (_cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
            rows.append((tt, ct, nc, f"{fn} ({Path(file).name}:{line})"))
        rows.sort(reverse=True)
        print(f"{'self us/job':>11} {'cum us/job':>10} {'calls/job':>9}  function")
        for tt, ct, nc, where in rows[: args.top]:
            print(f"{tt / n * 1e6:>11.2f} {ct / n * 1e6:>10.2f} {nc / n:>9.2f}  {where}")


def report_pyspy(path: Path, top: int) -> None:
    """Self time per function and inclusive time per step, over the samples under
    ``Worker.run`` (py-spy's raw format: ``frame;frame;... count``)."""
    selfs: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # Worker.run and what runs on the loop beside it (handlers, heartbeat) all sit
        # under the event loop's run; the filling runs under inner() -> enqueue_many.
        if not any(f.startswith("Runner.run") for f in frames) or any(
            k in f for f in frames for k in _NOT_THE_DRAIN
        ):
            continue
        n = int(count)
        total += n
        selfs[frames[-1]] += n
        for label, key in STEPS.items():
            if any(key in f for f in frames):
                incl[label] += n
    print(f"py-spy: {total} samples after the filling")
    print("inclusive share of each step:")
    for label, n in incl.most_common():
        print(f"  {n / total:6.1%}  {label}")
    print("self time, hottest functions:")
    for frame, n in selfs.most_common(top):
        print(f"  {n / total:6.1%}  {frame}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.drain_profile")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    p.add_argument("--profiler", choices=("pyspy", "cprofile", "none"), default="pyspy")
    p.add_argument("--out", type=Path, default=Path("/tmp/venturi-drain-profile"))
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--dsn",
        default=os.environ.get(
            "VENTURI_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    args = p.parse_args(argv)
    if args.profiler == "pyspy" and not args.inner:
        raw = Path(str(args.out) + ".txt")
        inner_args = list(argv if argv is not None else sys.argv[1:])
        spy = ["py-spy", "record", "--native", "--format", "raw", "-r", "500", "-o", str(raw)]
        subprocess.run(
            [
                *spy,
                "--",
                sys.executable,
                "-m",
                "benchmarks.tools.drain_profile",
                "--inner",
                *inner_args,
            ],
            check=True,
        )
        report_pyspy(raw, args.top)
        return 0
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(inner(args))
    else:
        asyncio.run(inner(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
