"""What the search index's maintenance pass costs per 10,000 finished jobs: its time and
the WAL it writes, with the GIN index's pending list (fastupdate on, at most 1 MB, the
schema's) and without it (each document inserted into the index), alternating.

    python -m benchmarks.search_index_cost [--jobs 100000] [--rounds 2]

Each arm: a throwaway database, the jobs of web_pages' seed, a checkpoint, then
``venturi.admin.index_search`` until caught up. The WAL position is the cluster's, so
other sessions' writes count too on a shared server. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import asyncpg

from venturi import admin, db, sql

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
ARMS = {
    "pending list (schema)": "fastupdate = on, gin_pending_list_limit = 1024",
    "no pending list": "fastupdate = off",
}


async def main(args: argparse.Namespace) -> None:
    server = await asyncpg.connect(args.dsn)
    name = f"bench_search_cost_{os.getpid()}"
    base = args.dsn.rsplit("/", 1)[0]
    try:
        for _ in range(args.rounds):
            for arm, options in ARMS.items():
                await server.execute(sql.database_statement("database_drop", name))
                await server.execute(sql.database_statement("database_create", name))
                conn = await db.connect.connect(f"{base}/{name}")
                await db.schema.apply_schema(conn, schema="venturi")
                await conn.execute(f"ALTER INDEX venturi.job_search_doc_idx SET ({options})")
                await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), args.jobs, 3600.0)
                await conn.execute("CHECKPOINT")
                wal0 = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
                t0 = time.perf_counter()
                done = await admin.index_search(conn, margin=0.0)
                took = time.perf_counter() - t0
                wal1 = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
                per = 10_000 / done.jobs
                print(
                    f"{arm:22} load {os.getloadavg()[0]:.2f}: {done.jobs:,} jobs in {took:.2f} s, "
                    f"{took * per:.2f} s and {float(wal1 - wal0) * per / 1e6:.1f} MB of WAL "
                    "per 10,000",
                    flush=True,
                )
                await conn.close()
    finally:
        await server.execute(sql.database_statement("database_drop", name))
        await server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_DSN))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
