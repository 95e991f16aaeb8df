"""The worker loop's own Python cost per job, without a database (issue 38): the real
``runtime.loop.Loop`` iterating over a connection that answers at once (every claim full,
every completion applied), no-op handlers, on uvloop. What is left out: the driver's
encoding and decoding, the socket, the server. What is in: claim bookkeeping, starting
each handler (Run, Context, task), the handler's path and outcome, reaping, settling.

    python -m benchmarks.tools.loop_micro --concurrency 32 --jobs 50000 --repeat 5

Prints the CPU (``time.process_time``) per job of each repeat and their median. The
rows are dicts, not asyncpg Records. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import msgspec

import venturi
from venturi import sql
from venturi.db.claims import Claimant
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.instruments import Instruments
from venturi.runtime.loop import Loop

KIND = "micro_noop"
T0_US = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000


class Noop(msgspec.Struct):
    i: int


@venturi.task(kind=KIND)
async def noop(ctx: venturi.Context[Any], carry: Noop) -> None:
    return None


class Answering:
    """Answers ``job_claim`` with ``limit`` fresh rows and every completion it carries as
    settled; anything else with no rows."""

    def __init__(self, schema: str) -> None:
        self.claim = sql.statement("job_claim", schema)
        self.claim_one = sql.statement("job_claim_one", schema)
        self.ids = itertools.count(1)
        self.claimed = 0

    def row(self) -> dict[str, Any]:
        return {
            "id": next(self.ids),
            "kind": KIND,
            "attempt": 1,
            "failures": 0,
            "carry": '{"i": 1}',
            "priority": 1,
            "created_us": T0_US,
            "traceparent": None,
            "grp": None,
            "lost": False,
            "waited": 0.0,
            "more": True,
        }

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        if query is self.claim_one:
            # An idle worker's first claim (a pickup): one job, and more behind it.
            self.claimed += 1
            return [self.row()]
        if query is not self.claim:
            return []
        # Every completion applied: job_claim answers only the lost ones.
        rows = [self.row() for _ in range(args[4])]
        self.claimed += args[4]
        return rows

    async def fetchrow(self, query: str, *args: Any) -> dict[str, Any] | None:
        # job_statistics_state (a claim that took long on a busy machine): not stale.
        return {"stale": False, "allowed": True}

    async def execute(self, query: str, *args: Any) -> str:
        return ""


async def once(concurrency: int, jobs: int) -> float:
    config = WorkerConfig.build("postgresql://nowhere.invalid/none", concurrency=concurrency)
    regs = [Registration.check(noop, None, None, None, None)]
    loop = Loop(config, Claimant("micro"), None, policies(regs, config), Instruments(False))
    conn = Answering(config.schema)
    shutdown = asyncio.Event()
    # Warm up, then measure.
    while conn.claimed < 2_000:
        await loop.iterate(conn, shutdown)  # type: ignore[arg-type]
        await asyncio.sleep(0)
    start, c0 = conn.claimed, time.process_time()
    while conn.claimed - start < jobs:
        loop.wake.clear()
        await loop.iterate(conn, shutdown)  # type: ignore[arg-type]
        await asyncio.sleep(0)
    return (time.process_time() - c0) / (conn.claimed - start) * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.loop_micro")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--jobs", type=int, default=50_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = p.parse_args(argv)
    got = []
    for _ in range(args.repeat):
        if args.loop == "uvloop":
            import uvloop

            us = uvloop.run(once(args.concurrency, args.jobs))
        else:
            us = asyncio.run(once(args.concurrency, args.jobs))
        got.append(us)
    each = " ".join(f"{x:.2f}" for x in got)
    print(
        f"loop_micro c={args.concurrency} {args.loop}: {statistics.median(got):.2f} us/job "
        f"(median of {args.repeat}: {each})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
