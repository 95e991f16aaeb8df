"""What a global cap costs the claim: a capped kind beside an uncapped one.

Times the claim alone, as the worker runs it: the uncapped kind through ``job_claim``
(one statement), the capped kind through ``db.claims.claim_within_cap`` (a transaction:
BEGIN, the kind's advisory cap lock, ``job_claim_capped``, COMMIT). Each client claims a
batch, then (untimed) completes it and enqueues as many new jobs, so the queue stays the
same size; the cap is set high enough never to refuse, so what is measured is the price
of enforcing it. The configurations alternate, capped and uncapped, for ``--rounds``
rounds; the median claim time of each is printed. Nothing is asserted.

    python -m benchmarks.global_cap [--dsn ADMIN_DSN] [--seconds 2] [--rounds 2]

Creates a database of its own on the server and drops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import urllib.parse
from typing import Any

import asyncpg

import venturi
from venturi import db, sql
from venturi.backoff import DEFAULT_BACKOFF

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
SCHEMA = "venturi"
PENDING = 5_000


@venturi.task(kind="bench_free")
async def free(ctx: venturi.Context[Any], carry: int) -> None:
    return None


@venturi.task(kind="bench_capped", global_cap=10_000)
async def capped(ctx: venturi.Context[Any], carry: int) -> None:
    return None


async def client(
    dsn: str, number: int, task: venturi.Task[Any], batch: int, seconds: float
) -> list[float]:
    """Claim ``batch`` jobs of ``task``'s kind again and again for ``seconds``: the time
    of each claim call, in seconds."""
    conn = await asyncpg.connect(dsn)
    claimant = db.Claimant(f"bench:{number}")
    times: list[float] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            start = time.perf_counter()
            if task.global_cap is None:
                answer = await db.claims.job_claim(
                    conn,
                    schema=SCHEMA,
                    claimant=claimant,
                    kinds=[task.kind],
                    leases=[60.0],
                    floor=0,
                    limit=batch,
                    backoff=DEFAULT_BACKOFF,
                )
                rows = answer.claimed
            else:
                rows = (
                    await db.claims.claim_within_cap(
                        conn,
                        schema=SCHEMA,
                        claimant=claimant,
                        kind=task.kind,
                        lease=60.0,
                        global_cap=task.global_cap,
                        wanted=batch,
                    )
                ).claimed
            times.append(time.perf_counter() - start)
            await db.settle.job_complete_many_if_owned(
                conn,
                schema=SCHEMA,
                claimant=claimant,
                ids=[r["id"] for r in rows],
                attempts=[r["attempt"] for r in rows],
                results=[None] * len(rows),
            )
            await venturi.enqueue_many(conn, [task.job(i) for i in range(len(rows))])
    finally:
        await conn.close()
    return times


async def measure(
    dsn: str, task: venturi.Task[Any], clients: int, batch: int, seconds: float
) -> list[float]:
    runs = await asyncio.gather(*(client(dsn, i, task, batch, seconds) for i in range(clients)))
    return [t for run in runs for t in run]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_DSN))
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    name = f"bench_cap_{os.getpid()}"
    server = await asyncpg.connect(args.dsn)
    await server.execute(sql.database_statement("database_drop", name))
    await server.execute(sql.database_statement("database_create", name))
    parts = urllib.parse.urlsplit(args.dsn)
    dsn = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    try:
        conn = await db.connect.connect(dsn)
        await db.schema.apply_schema(conn, schema=SCHEMA)
        for task in (free, capped):
            await venturi.enqueue_many(conn, [task.job(i) for i in range(PENDING)])
        await conn.execute(sql.statement("maintenance/analyze"))
        await conn.close()
        print(
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
            f"{PENDING} pending jobs of each kind, {args.seconds:g} s per run"
        )
        results: dict[tuple[str, int, int], list[float]] = {}
        for _ in range(args.rounds):
            for clients in (1, 4):
                for batch in (1, 10):
                    for task in (free, capped):
                        times = await measure(dsn, task, clients, batch, args.seconds)
                        results.setdefault((task.kind, clients, batch), []).extend(times)
        print(f"{'clients':>7} {'batch':>5} {'uncapped ms':>12} {'capped ms':>10} {'extra':>7}")
        for clients in (1, 4):
            for batch in (1, 10):
                plain = statistics.median(results[(free.kind, clients, batch)]) * 1000
                cap = statistics.median(results[(capped.kind, clients, batch)]) * 1000
                print(
                    f"{clients:>7} {batch:>5} {plain:>12.3f} {cap:>10.3f} "
                    f"{(cap / plain - 1) * 100:>+6.0f}%"
                )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        await server.execute(sql.database_statement("database_drop", name))
        await server.close()


if __name__ == "__main__":
    asyncio.run(main())
