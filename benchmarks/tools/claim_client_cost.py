"""The client's CPU per claim statement, part by part (issue 38): what the worker pays
in Python and in the driver for one ``job_claim`` round trip, beside the jobs it runs.

    python -m benchmarks.tools.claim_client_cost --claims 2000 --done 10

On a throwaway database with an empty queue (so the server returns only the completion
rows and the client's side is what varies), ``--claims`` claims carrying ``--done``
completions each (ids of claimed jobs, so each comes back as a settled row), taken
three ways, alternating in rounds: ``db.claims.job_claim`` on the worker's ``Held``
connection (the worker's path: the held connection's deadline, its prepared statement);
the same statement prepared on a plain connection and fetched directly (the driver
alone); and a trivial prepared ``SELECT 1`` (the round trip's floor in the driver). The
CPU (``time.process_time``) per claim of each, median over ``--rounds``. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import asyncpg
import msgspec

import venturi
from benchmarks.common import scratch_database
from benchmarks.sql import statement as bsql
from venturi import db, sql
from venturi.db.claims import Claimant


class Noop(msgspec.Struct):
    i: int


@venturi.task(kind="cost_noop")
async def noop(ctx: venturi.Context[Any], carry: Noop) -> None:
    return None


async def main(args: argparse.Namespace) -> None:
    async with scratch_database(args.dsn, f"bench_claimcost_{os.getpid()}") as dsn:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema="venturi")
        pool = await db.connect.create_worker_pool(dsn, min_size=1, max_size=2)
        held = db.held.hold(pool, 30.0)
        me = Claimant("cost")
        # Claimed jobs to carry as completions: settled rows come back, as in a drain.
        ids = await venturi.enqueue_many(conn, [noop.job(Noop(i)) for i in range(args.done)])
        got = await db.claims.job_claim(
            conn,
            schema="venturi",
            claimant=me,
            kinds=["cost_noop"],
            leases=[900.0],
            floor=0,
            limit=args.done,
        )
        done = [(r["id"], r["attempt"], None) for r in got.claimed]
        assert len(done) == len(ids)
        # Completions whose claim token is another's apply to nothing but are sent and
        # looked up as a real worker's are; every claim then finds the queue empty.
        other = Claimant("cost")
        text = sql.statement("job_claim", "venturi")
        stmt = await conn.prepare(text)
        one = await conn.prepare(bsql("server_now"))
        params = (
            other.name,
            ["cost_noop"],
            [900.0],
            0,
            args.done,
            [d[0] for d in done],
            [d[1] for d in done],
            [d[2] for d in done],
            other.token,
            True,
        )

        async def worker_path() -> None:
            await db.claims.job_claim(
                held,
                schema="venturi",
                claimant=other,
                kinds=["cost_noop"],
                leases=[900.0],
                floor=0,
                limit=args.done,
                done=done,
            )

        async def driver() -> None:
            await stmt.fetch(*params)

        async def floor() -> None:
            await one.fetch()

        ways = {"job_claim on Held": worker_path, "prepared fetch": driver, "now()": floor}
        await _measure(ways, args)
        await held.close()
        await pool.close()
        await conn.close()


async def _measure(ways: dict[str, Any], args: argparse.Namespace) -> None:
    """Each way's client CPU per call, round after round (and a profile first, if asked)."""
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.claims):
            await ways["job_claim on Held"]()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    got_us: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.rounds):
        for label, fn in ways.items():
            c0 = time.process_time()
            for _ in range(args.claims):
                await fn()
            got_us[label].append((time.process_time() - c0) / args.claims * 1e6)
    print(
        f"client CPU per claim, {args.done} completions carried, median of {args.rounds} "
        f"rounds of {args.claims} (load {os.getloadavg()[0]:.2f}):"
    )
    for label, xs in got_us.items():
        each = " ".join(f"{x:.1f}" for x in xs)
        print(f"  {label:<20} {statistics.median(xs):7.1f} us   ({each})")


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.claim_client_cost")
    p.add_argument("--claims", type=int, default=2000)
    p.add_argument("--done", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="cProfile the worker's path first")
    p.add_argument(
        "--dsn",
        default=os.environ.get(
            "VENTURI_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    import uvloop

    uvloop.run(main(p.parse_args()))
