"""What a grouped claim costs as groups grow (issue 37, item 2), in buffers per claimed
job from ``EXPLAIN (ANALYZE, BUFFERS)``, and how long ``venturi groups list`` takes.

    python -m benchmarks.tools.group_claim_cost --out benchmarks/results/group-claim-cost.json

For each case (groups with work x idle groups known), in a scratch database of its own:
the jobs are enqueued (``--per-group`` each, in groups ``g0..``), the idle groups seeded
(a row each, not ready, no job), the wake-ups applied by claims of nothing, the tables
vacuumed and analyzed (as autovacuum keeps a live queue; ``--no-vacuum`` leaves that
out), then
``job_claim_grouped`` of ``--batch`` jobs is explained with ANALYZE and BUFFERS
``--repeat`` times, each inside a transaction rolled back (every repeat claims from the
same state). The figure is the shared buffers the statement touched (hit + read) per job
it claimed, the median of the repeats, with the execution time beside it. Then, with
100,000 groups each holding a pending job, ``admin.list_groups`` (the top page by
pending) is timed. Nothing is asserted; the figures are what docs/groups.md quotes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

import asyncpg

from benchmarks.common import add_dsn_option, log, median, save_run, scratch_database
from benchmarks.sql import explain
from benchmarks.sql import statement as bsql
from venturi import admin, db, sql
from venturi.db.enqueue import JobSpec

KIND = "bench_grouped"
CASES = ((100, 0), (10_000, 0), (100, 100_000), (10_000, 100_000))


async def _seed(conn: asyncpg.Connection, groups: int, per_group: int, idle: int) -> None:
    specs = [
        JobSpec(KIND, "{}", 1, None, None, None, 25, group=f"g{g}")
        for _ in range(per_group)
        for g in range(groups)
    ]
    for i in range(0, len(specs), 50_000):
        await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs[i : i + 50_000])
    if idle:
        await conn.execute(bsql("groups_seed_idle"), KIND, idle)
    await conn.execute(sql.statement("maintenance/analyze"))


def _args(batch: int) -> tuple[Any, ...]:
    # The last three: no completions ride the claim.
    return ("bench", KIND, 60.0, 0, batch, uuid.uuid4(), None, None, None, None, True, [], [], [])


async def _wake_all(conn: asyncpg.Connection) -> None:
    """Apply every wake-up an enqueue left (a claim of nothing applies 1,000 a time)."""
    while True:
        row = (await conn.fetch(sql.statement("job_claim_grouped"), *_args(0)))[-1]
        if not row["woken"]:
            return


def _buffers(plan: dict[str, Any]) -> int:
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


async def _explained(conn: asyncpg.Connection, batch: int, repeat: int) -> dict[str, float]:
    text = explain(sql.statement("job_claim_grouped"), "ANALYZE, BUFFERS, FORMAT JSON")
    per_job, took, claimed = [], [], []
    for _ in range(repeat):
        tx = conn.transaction()
        await tx.start()
        try:
            raw = await conn.fetchval(text, *_args(batch))
        finally:
            await tx.rollback()
        plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
        rows = int(plan["Plan"].get("Actual Rows", 0)) - 1  # less the summary row
        claimed.append(rows)
        per_job.append(_buffers(plan) / max(rows, 1))
        took.append(float(plan["Execution Time"]))
    return {
        "claimed": median([float(c) for c in claimed]),
        "buffers_per_job": median(per_job),
        "execution_ms": median(took),
    }


async def _case(dsn: str, groups: int, idle: int, args: argparse.Namespace) -> dict[str, Any]:
    async with scratch_database(dsn, "venturi_bench_groups") as url:
        conn = await asyncpg.connect(url)
        try:
            await db.schema.apply_schema(conn, schema="venturi")
            await _seed(conn, groups, args.per_group, idle)
            await _wake_all(conn)
            if not args.no_vacuum:
                # As autovacuum keeps a live queue: the wake-ups just applied are dead rows.
                await conn.execute(bsql("groups_vacuum"))
            found = await _explained(conn, args.batch, args.repeat)
        finally:
            await conn.close()
    log(f"{groups} groups with work, {idle} idle: {found}")
    return {"groups_with_work": groups, "idle_groups": idle, **found}


async def _list_time(dsn: str, groups: int) -> dict[str, Any]:
    async with scratch_database(dsn, "venturi_bench_groups") as url:
        conn = await asyncpg.connect(url)
        try:
            await db.schema.apply_schema(conn, schema="venturi")
            await _seed(conn, groups, 1, 0)
            await _wake_all(conn)
            took = []
            for _ in range(5):
                start = time.perf_counter()
                page = await admin.list_groups(conn, KIND, limit=50)
                took.append((time.perf_counter() - start) * 1000)
        finally:
            await conn.close()
    log(f"groups list of {groups} groups: {median(took):.1f} ms (page of {len(page)})")
    return {"groups": groups, "list_ms_median": median(took), "list_ms": took}


async def main(args: argparse.Namespace) -> None:
    cases = [] if args.list_only else [await _case(args.dsn, g, i, args) for g, i in CASES]
    listing = await _list_time(args.dsn, args.list_groups)
    lines = [f"{'groups with work':>16} {'idle':>8} {'claimed':>8} {'buffers/job':>12} {'ms':>8}"]
    for c in cases:
        lines.append(
            f"{c['groups_with_work']:>16,} {c['idle_groups']:>8,} {c['claimed']:>8.0f} "
            f"{c['buffers_per_job']:>12.1f} {c['execution_ms']:>8.2f}"
        )
    lines.append(
        f"venturi groups list, {args.list_groups:,} groups: {listing['list_ms_median']:.1f} ms"
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        save_run(args.out, {"cases": cases, "list": listing, "batch": args.batch}, text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_dsn_option(parser)
    parser.add_argument("--batch", type=int, default=32, help="jobs a claim asks for")
    parser.add_argument("--per-group", type=int, default=5, help="pending jobs per group")
    parser.add_argument("--repeat", type=int, default=5, help="explained claims per case")
    parser.add_argument("--list-groups", type=int, default=100_000)
    parser.add_argument(
        "--list-only", action="store_true", help="time `venturi groups list` alone, no claims"
    )
    parser.add_argument(
        "--no-vacuum",
        action="store_true",
        help="claim with the wake-ups just applied still dead in group_wakes",
    )
    parser.add_argument("--out", help="where to keep the JSON and the table")
    asyncio.run(main(parser.parse_args()))
