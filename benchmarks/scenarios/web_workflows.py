"""How long the dashboard's workflow pages take beside a million jobs: the workflows
list (/workflows, its filters and paging, /api/workflows) and the job page of a
workflow (a saga root, a child, a Workflow graph's middle node, a parent of thousands
of children).

Seeds a throwaway database as benchmarks/web_pages.py does (1,000,000 jobs of
``maintenance/jobs_seed_bulk``), then ``maintenance/workflows_seed_bulk``: 20,000 sagas
(a root with four steps and two children; 90% completed, 6% waiting, 4% dead) and 5,000
three-node Workflow graphs, 75,000 more jobs; one saga gets 5,000 more children. Vacuums
as autovacuum would, then requests each route through the ASGI app in-process and
prints the median of several requests. Nothing is asserted.

    python -m benchmarks.web_workflows [--dsn ADMIN_DSN] [--jobs 1000000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import urllib.parse

import asyncpg
import httpx

import venturi.web
from benchmarks.web_pages import DEFAULT_DSN
from venturi import admin, db, sql

SAGAS = 20_000
GRAPHS = 5_000
FAN_OUT = 5_000  # extra children of one saga: a parent of thousands


def routes(saga: int, child: int, middle: int, big: int, mid: int) -> list[str]:
    return [
        "/workflows",
        "/workflows?status=waiting",
        "/workflows?status=dead",
        "/workflows?kind=saga_1",
        "/workflows?status=dead&kind=saga_1",
        "/workflows?kind=extract",  # 5,000 graphs, older than every saga
        "/workflows?status=cancelled",  # no workflow matches: every workflow id is read
        "/workflows?kind=kind_3",  # a plain kind: the same
        f"/workflows?before={mid}",
        f"/workflows?after={mid}",
        "/api/workflows",
        "/api/workflows?status=waiting&limit=200",
        f"/jobs/{saga}",
        f"/jobs/{child}",
        f"/jobs/{middle}",
        f"/jobs/{big}",
    ]


async def seed(conn: asyncpg.Connection, jobs: int) -> list[str]:
    """The seed, and the routes to time with its ids."""
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), jobs, 172_800.0)
    await conn.execute(sql.statement("maintenance/journal_seed_bulk"))
    await conn.execute(sql.statement("maintenance/workflows_seed_bulk"), SAGAS, GRAPHS)
    saga = (await admin.list_workflows(conn, kind="saga_1", limit=1)).rows[0].id
    detail = await admin.show_job(conn, saga)
    assert detail is not None and detail.children
    source = (await admin.list_workflows(conn, kind="extract", limit=1)).rows[0].id
    graph = await admin.workflow_graph(conn, source, drawn=10)
    middle = next(j.id for j in graph.jobs if j.kind == "transform")
    big = (await admin.list_workflows(conn, kind="saga_0", limit=1)).rows[0].id
    await conn.execute(sql.statement("maintenance/workflows_seed_fan_out"), big, FAN_OUT)
    await conn.execute(sql.statement("maintenance/vacuum_analyze"))
    page = await admin.list_workflows(conn, limit=500)
    mid = page.rows[len(page.rows) // 2].id
    return routes(saga, detail.children[0].id, middle, big, mid)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_DSN))
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    name = f"bench_webwf_{os.getpid()}"
    server = await asyncpg.connect(args.dsn)
    await server.execute(sql.database_statement("database_drop", name))
    await server.execute(sql.database_statement("database_create", name))
    parts = urllib.parse.urlsplit(args.dsn)
    dsn = urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    try:
        conn = await db.connect.connect(dsn)
        await db.schema.apply_schema(conn, schema="venturi")
        t0 = time.perf_counter()
        paths = await seed(conn, args.jobs)
        added = 4 * SAGAS + 3 * GRAPHS + FAN_OUT
        print(f"seeded {args.jobs:,} + {added:,} jobs in {time.perf_counter() - t0:.1f} s")
        await conn.close()
        print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        app = venturi.web.app(dsn)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            print(f"{'route':45} {'status':>6} {'median ms':>10} {'max ms':>8} {'bytes':>8}")
            for path in paths:
                await client.get(path)  # warm: the pool, the statement caches
                times = []
                for _ in range(args.repeat):
                    t = time.perf_counter()
                    r = await client.get(path)
                    times.append((time.perf_counter() - t) * 1000)
                print(
                    f"{path:45} {r.status_code:>6} {statistics.median(times):>10.1f} "
                    f"{max(times):>8.1f} {len(r.content):>8}"
                )
        print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        await app.state.dashboard.db.close()
    finally:
        await server.execute(sql.database_statement("database_drop", name))
        await server.close()


if __name__ == "__main__":
    asyncio.run(main())
