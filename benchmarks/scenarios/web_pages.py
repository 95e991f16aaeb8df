"""How long each dashboard page, search and API route takes with a million jobs.

Seeds a throwaway database with 1,000,000 jobs in one statement (mostly completed, some
dead, cancelled, pending, claimed, over two days, a third keyed; a journal of their
failures), indexes the finished ones for the search as the workers' SearchIndex pass
would (timed; --no-index leaves them to be read row by row), with --history moves them to
the history table as the workers' History pass would (timed), vacuums it as autovacuum
would, then requests every route through the ASGI app in-process (httpx's ASGI transport:
the app's own work, templates included, without a network) and prints the median of
several requests per route. Nothing is asserted.

    python -m benchmarks.scenarios.web_pages [--dsn ADMIN_DSN] [--jobs 1000000] [--repeat 9]
        [--no-index] [--only-search] [--history]

Needs the test extra (httpx) and the web extra; drops its database at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import httpx

import venturi.web
from benchmarks.common import add_dsn_option, scratch_database
from venturi import admin, db, sql


def routes(dead_id: int, mid_id: int, key_id: int) -> list[str]:
    return [
        "/",
        "/partials/overview",
        "/jobs",
        "/jobs?status=dead",
        "/jobs?status=pending",
        "/jobs?status=claimed",
        "/jobs?status=completed",
        "/jobs?kind=rare",
        f"/jobs?kind=kind_3&before={mid_id}",
        f"/jobs?status=dead&kind=kind_2&before={mid_id}",
        f"/jobs?key=order-{key_id}",
        f"/jobs/{dead_id}",
        "/kinds",
        "/workers",
        "/schedules",
        "/jobs/bulk?action=retry&status=dead&kind=kind_5",
        # The search box (each search: its tsquery, the known kinds, the page, its total).
        "/jobs?q=upstream",  # a word of every dead job's error (2%)
        "/jobs?q=upstream&status=dead",
        "/jobs?q=example.com",  # a host in every carry
        "/jobs?q=example.com&status=dead&kind=kind_2",
        f"/jobs?q=order-{key_id}",  # one key
        f"/jobs?q=refused+{dead_id}",  # one dead job's error
        "/jobs?q=kind_",  # a kind prefix: every job
        "/jobs?q=rare",  # a rare kind's prefix
        "/jobs?q=nothing+matches+this",  # no match at all
        "/jobs?q=example.com&status=pending",  # unfinished jobs only: none indexed
        "/jobs?q=kind_3+upstream",  # a kind's word and an error's
        "/jobs?q=https&status=claimed",
        f"/jobs?q=example.com&before={mid_id}",  # a deep page
        f"/jobs?q=upstream&after={mid_id}",  # paging back
        "/kind?name=kind_3",
        "/kind?name=kind_3&period=24h",
        "/kind?name=kind_3&period=7d",
        "/api/jobs",
        "/api/jobs?status=dead&kind=kind_2",
        f"/api/jobs/{dead_id}",
        "/api/workers",
        "/api/stats",
    ]


async def time_routes(dsn: str, paths: list[str], repeat: int, width: int = 55) -> None:
    """Request each route through the dashboard's ASGI app in-process and print the median
    and the maximum of ``repeat`` requests (after one to warm the pool and caches)."""
    # The machine may be shared: the load says how quiet it was.
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    app = venturi.web.app(dsn)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        print(f"{'route':{width}} {'status':>6} {'median ms':>10} {'max ms':>8} {'bytes':>8}")
        for path in paths:
            await client.get(path)  # warm: the pool, the statement caches
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                r = await client.get(path)
                times.append((time.perf_counter() - t) * 1000)
            print(
                f"{path:{width}} {r.status_code:>6} {statistics.median(times):>10.1f} "
                f"{max(times):>8.1f} {len(r.content):>8}"
            )
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    await app.state.dashboard.db.close()


async def seed(conn: Any, args: argparse.Namespace) -> list[str]:
    """The million jobs, their search index and (``--history``) the history table; the
    routes to time."""
    await db.schema.apply_schema(conn, schema="venturi")
    t0 = time.perf_counter()
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), args.jobs, 172_800.0)
    await conn.execute(sql.statement("maintenance/journal_seed_bulk"))
    print(f"seeded {args.jobs:,} jobs in {time.perf_counter() - t0:.1f} s")
    if not args.no_index:
        # What the workers' SearchIndex pass does, in one go: batches of 5,000.
        t0 = time.perf_counter()
        done = await admin.index_search(conn, margin=0.0)
        took = time.perf_counter() - t0
        print(
            f"indexed {done.jobs:,} finished jobs for the search in {took:.1f} s "
            f"({took / max(done.jobs, 1) * 10_000:.2f} s per 10,000)"
        )
    if args.history:
        t0 = time.perf_counter()
        moved = await admin.move_to_history(conn)
        print(
            f"moved {moved.jobs:,} finished jobs to the history in {time.perf_counter() - t0:.1f} s"
        )
    await conn.execute(sql.statement("maintenance/vacuum_analyze"))
    dead = await admin.list_jobs(conn, status="dead", limit=1)
    mid = args.jobs // 2
    # The seed keys every third job "order-<its number>", ids counting from 1.
    paths = routes(dead[0].id, mid, mid - mid % 3)
    return [p for p in paths if "q=" in p] if args.only_search else paths


async def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scenarios.web_pages", description=__doc__.splitlines()[0]
    )
    add_dsn_option(parser)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-index", action="store_true", help="leave the search index empty")
    parser.add_argument("--only-search", action="store_true", help="the search routes only")
    parser.add_argument(
        "--history",
        action="store_true",
        help="move the finished jobs to the history table first, as the workers' History "
        "pass would",
    )
    args = parser.parse_args()
    async with scratch_database(args.dsn, f"bench_web_{os.getpid()}") as dsn:
        conn = await db.connect.connect(dsn)
        try:
            paths = await seed(conn, args)
        finally:
            await conn.close()
        await time_routes(dsn, paths, args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
