"""How long the dashboard's workflow pages take beside a million jobs: the workflows
list (/workflows, its filters and paging, /api/workflows) and the job page of a
workflow (a saga root, a child, a Workflow graph's middle node, a parent of thousands
of children).

Seeds a throwaway database as benchmarks/scenarios/web_pages.py does (1,000,000 jobs of
``maintenance/jobs_seed_bulk``), then ``maintenance/workflows_seed_bulk``: 20,000 sagas
(a root with four steps and two children; 90% completed, 6% waiting, 4% dead) and 5,000
three-node Workflow graphs, 75,000 more jobs; one saga gets 5,000 more children. Vacuums
as autovacuum would, then requests each route through the ASGI app in-process and
prints the median of several requests. Nothing is asserted.

    python -m benchmarks.scenarios.web_workflows [--dsn ADMIN_DSN] [--jobs 1000000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import asyncpg

from benchmarks.common import add_dsn_option, scratch_database
from benchmarks.scenarios.web_pages import time_routes
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
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scenarios.web_workflows", description=__doc__.splitlines()[0]
    )
    add_dsn_option(parser)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    async with scratch_database(args.dsn, f"bench_webwf_{os.getpid()}") as dsn:
        conn = await db.connect.connect(dsn)
        try:
            await db.schema.apply_schema(conn, schema="venturi")
            t0 = time.perf_counter()
            paths = await seed(conn, args.jobs)
            added = 4 * SAGAS + 3 * GRAPHS + FAN_OUT
            print(f"seeded {args.jobs:,} + {added:,} jobs in {time.perf_counter() - t0:.1f} s")
        finally:
            await conn.close()
        await time_routes(dsn, paths, args.repeat, width=45)


if __name__ == "__main__":
    asyncio.run(main())
