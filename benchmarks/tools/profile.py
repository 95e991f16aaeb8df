"""Profile venturi's worker or enqueue path in-process with pyinstrument.

    python -m benchmarks.tools.profile drain --concurrency 32 --jobs 20000
    python -m benchmarks.tools.profile drain --concurrency 1 --jobs 3000
    python -m benchmarks.tools.profile single --jobs 2000
    python -m benchmarks.tools.profile bulk --jobs 50000

Creates a throwaway database on the admin DSN (``--dsn``), fills it, runs the chosen
path under pyinstrument (``pip install pyinstrument``; not part of the ``bench`` extra)
and prints the call tree, or writes HTML with ``--html``. For a worker in its own process
use py-spy instead, e.g. ``py-spy record -o out.svg -- python -m benchmarks.worker_proc
SPEC`` with a SPEC as ``benchmarks.compare`` builds it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import venturi
from benchmarks.common import add_dsn_option, create_database, drop_database
from benchmarks.probe import install as install_probe
from benchmarks.systems.venturi import Client as VenturiClient
from benchmarks.systems.venturi import venturi_noop


async def run(args: argparse.Namespace, profiler: Any) -> str:
    name = f"bench_venturi_profile_{os.getpid()}"
    dsn = await create_database(args.dsn, name)
    client = VenturiClient(dsn)
    try:
        await client.open()
        await client.install()
        if args.what == "drain":
            pending = max(args.pending, args.jobs)
            for start in range(0, pending, 10_000):
                await client.enqueue_bulk(start, min(10_000, pending - start))
            await client.analyze()
            stop = asyncio.Event()
            seen = 0

            def probe(_i: int) -> None:
                nonlocal seen
                seen += 1
                if seen == args.jobs:
                    stop.set()

            install_probe(probe)
            worker = venturi.Worker(None, dsn, [venturi_noop], concurrency=args.concurrency)
            t0 = time.monotonic()
            profiler.start()
            await worker.run(stop)
            profiler.stop()
            rate = args.jobs / (time.monotonic() - t0)
            return f"drained {args.jobs:,} of {pending:,} pending at c={args.concurrency}: {rate:,.0f} jobs/s"
        t0 = time.monotonic()
        profiler.start()
        if args.what == "single":
            for i in range(args.jobs):
                await client.enqueue_one(i)
        else:
            for start in range(0, args.jobs, args.batch):
                await client.enqueue_bulk(start, min(args.batch, args.jobs - start))
        profiler.stop()
        rate = args.jobs / (time.monotonic() - t0)
        return f"{args.what} enqueue of {args.jobs:,} jobs: {rate:,.0f} jobs/s"
    finally:
        await client.close()
        await drop_database(args.dsn, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.profile")
    parser.add_argument("what", choices=("drain", "single", "bulk"))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--pending", type=int, default=0, help="drain: rows pending at start")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1_000, help="bulk: jobs per call")
    parser.add_argument("--interval", type=float, default=0.0005, help="sampling interval, s")
    parser.add_argument("--html", metavar="PATH")
    parser.add_argument("--all", action="store_true", help="show library frames too")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    add_dsn_option(parser)
    args = parser.parse_args(argv)
    try:
        from pyinstrument import Profiler
    except ImportError:
        sys.exit("benchmarks.tools.profile needs pyinstrument: pip install pyinstrument")
    profiler = Profiler(interval=args.interval, async_mode="disabled")
    if args.loop == "uvloop":
        import uvloop

        summary = uvloop.run(run(args, profiler))
    else:
        summary = asyncio.run(run(args, profiler))
    print(summary)
    if args.html:
        Path(args.html).write_text(profiler.output_html())
        print(f"wrote {args.html}")
    else:
        print(profiler.output_text(unicode=False, color=False, show_all=args.all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
