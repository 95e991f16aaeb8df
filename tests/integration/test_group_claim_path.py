"""The claim path of a worker with grouped kinds (SPEC 13; migration 21): the claim of
jobs without a group never reads a grouped row, completions ride the grouped claim
under the ownership guard, the grouped claim is prepared once and keeps a generic plan,
and a worker whose groups are all at their caps claims again as its jobs finish."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_until
from tests.support.plans import nodes
from venturi import Context, admin, db, sql
from venturi.runtime.worker import Worker
from venturi.tasks import JobSpec

SCHEMA = "venturi"
W1 = db.Claimant("w:1")
CAP1 = db.groups.GroupLimits(1, None, None)


async def _grouped(conn: asyncpg.Connection, n: int, groups: int) -> None:
    specs = [JobSpec("k", "{}", 1, None, None, None, 25, group=f"g{i % groups}") for i in range(n)]
    await db.enqueue.job_insert_many(conn, schema=SCHEMA, specs=specs)


async def _claim_grouped(
    conn: Any, limit: int, done: Sequence[tuple[int, int, str | None]] = ()
) -> db.groups.GroupedClaim:
    """One grouped claim of kind k (group_cap 1), as the worker's, with ``done`` riding it."""
    claim, _ = await db.groups.claim_grouped(
        conn,
        schema=SCHEMA,
        claimant=W1,
        kind="k",
        lease=60.0,
        floor=0,
        limit=limit,
        limits=CAP1,
        done=done,
    )
    return claim


async def _claim_all(conn: Any, wanted: int) -> list[asyncpg.Record]:
    """Grouped claims until ``wanted`` jobs are claimed (the first applies the wake-ups)."""
    rows: list[asyncpg.Record] = []
    for _ in range(10):
        rows += (await _claim_grouped(conn, wanted - len(rows))).claimed
        if len(rows) >= wanted:
            return rows
    raise AssertionError(f"claimed {len(rows)} of {wanted}")


async def test_the_claim_of_jobs_without_a_group_reads_no_grouped_row(
    conn: asyncpg.Connection,
) -> None:
    # 2,000 grouped jobs of the kind, older than its one job without a group: the claim
    # of jobs without a group (job_claim) used to read each of them to leave it out.
    await _grouped(conn, 2000, 50)
    await db.enqueue.job_insert_many(
        conn, schema=SCHEMA, specs=[JobSpec("k", "{}", 1, None, None, None, 25)]
    )
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    plan = await conn.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.statement("job_claim", SCHEMA),
        "w:1",
        ["k"],
        [60.0],
        0,
        10,
        [],
        [],
        [],
        uuid.uuid4(),
        True,
    )
    found = nodes(json.loads(plan))
    jobs_reads = [n for n in found if n.get("Relation Name") == "jobs" and n.get("Actual Loops")]
    removed = sum(int(n.get("Rows Removed by Filter", 0)) for n in jobs_reads)
    claimed = [n for n in found if n.get("Node Type") == "ModifyTable" and n.get("Actual Rows")]
    assert claimed and claimed[0]["Actual Rows"] == 1  # the one job without a group
    assert removed == 0, f"the claim read {removed} rows it left out"
    # Every pending job still counts: the operators' counts read both indexes.
    stats = await admin.stats(conn)
    assert {k.kind: k.due for k in stats.kinds} == {"k": 2000}  # one claimed


async def test_completions_ride_the_grouped_claim_only_for_the_run_that_owns_them(
    conn: asyncpg.Connection,
) -> None:
    await _grouped(conn, 6, 3)  # three groups of two, group_cap 1
    first = await _claim_all(conn, 3)
    assert sorted(r["grp"] for r in first) == ["g0", "g1", "g2"]
    done = [(r["id"], r["attempt"], None) for r in first[:2]]
    stale = (first[2]["id"], first[2]["attempt"] + 1, None)  # an attempt it does not hold
    claim = await _claim_grouped(conn, 10, [*done, stale])
    assert claim.settled == {first[0]["id"], first[1]["id"]}
    status = dict(await conn.fetch("SELECT id, status FROM venturi.jobs"))
    assert [status[r["id"]] for r in first] == ["completed", "completed", "claimed"]
    # Each group stays within its cap in the claim that frees its slot: the statement's
    # snapshot still sees the completed jobs claimed, so nothing more is claimed now...
    assert claim.claimed == []
    # ...and the next claim takes the freed groups' second jobs, not g2's (still at cap).
    nxt = await _claim_grouped(conn, 10)
    assert sorted(r["grp"] for r in nxt.claimed) == ["g0", "g1"]


async def test_the_worker_s_grouped_claim_is_prepared_once_and_keeps_a_generic_plan(
    pool: asyncpg.Pool,
) -> None:
    # Through the loop's held connection, as a worker claims: the statement (16 KiB,
    # past asyncpg's default cache limit) was parsed and planned anew for every claim,
    # and even prepared, its floor, rate and global cap folded into constants made each
    # custom plan look cheaper than the generic one.
    await _grouped(pool, 200, 100)
    await pool.execute(sql.statement("maintenance/analyze", SCHEMA))
    held = db.held.Held(pool)
    try:
        for _ in range(8):
            await _claim_grouped(held, 1)
        (stmt, _), *_ = held._plans.values()
        assert "job_claim_grouped" in stmt.get_query()
        generic = await held.conn.fetchval(
            "SELECT generic_plans FROM pg_prepared_statements WHERE name = $1", stmt.get_name()
        )
        assert generic >= 2
    finally:
        await held.close()


async def test_a_connection_caches_the_grouped_claim(dsn: str) -> None:
    # Outside the held connection (a claim within a global cap or a shared rate runs in
    # a transaction of its own), asyncpg's own cache must take the statement.
    conn = await db.connect.connect(dsn)
    try:
        text = sql.statement("job_claim_grouped", SCHEMA)
        assert len(text) > 15 * 1024  # asyncpg's default limit
        args = ("w:1", "k", 60.0, 0, 1, uuid.uuid4(), 1, None, None, None, True, [], [], [])
        for _ in range(2):
            async with conn.transaction():
                await conn.fetch(text, *args)
        cached = await conn.fetchval(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", text
        )
        assert cached == 1
    finally:
        await conn.close()


async def test_a_worker_whose_groups_are_all_at_their_caps_claims_again_as_they_finish(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Every group at its cap and nothing else to run: the claim that carries the
    # finished jobs' completions still sees their slots taken (its snapshot), and found
    # nothing. It must claim again at once, not sleep poll_max (60 s here: the drain of
    # 24 jobs of a few milliseconds each took concurrency jobs per poll_max before).
    done = 0

    @venturi.task(kind="g_capped", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        nonlocal done
        done += 1

    await venturi.enqueue_many(conn, [handler.job(Item(i), group=f"g{i % 4}") for i in range(24)])
    worker = Worker(None, dsn, [handler], concurrency=4, poll_max=60)
    async with running(worker):
        await wait_until(lambda: done == 24, within=20)
    assert worker.stats["claimed"] == 24
