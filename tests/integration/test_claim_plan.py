"""The worker's claim keeps a generic plan (no planning per claim), and makes it anew
when a backlog arrives after the plan was made on an empty queue."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from tests.support.plans import generic_plan, nodes
from tests.support.sql import statement as tsql
from venturi import JobSpec, db, sql

W1 = db.Claimant("w:1")


async def _claim(held: db.held.Held, *, replan: bool = False, limit: int = 10) -> int:
    answer = await db.claims.job_claim(
        held,
        schema="venturi",
        claimant=W1,
        kinds=["k"],
        leases=[60.0],
        floor=0,
        limit=limit,
        replan=replan,
    )
    return len(answer.claimed)


def _statement(held: db.held.Held) -> Any:
    (stmt, _), *_ = held._plans.values()
    return stmt


async def _scans(held: db.held.Held) -> set[str]:
    """How the held claim statement's plan of choice reads ``jobs``: EXPLAIN EXECUTE of
    the worker's own prepared statement, on its own session (an execution like any
    other: past five, PostgreSQL picks the generic plan if it prefers it)."""
    conn = held.conn
    args = "'w:1', '{k}', '{60}', 0, 0, '{}', '{}', '{}', gen_random_uuid(), true"
    text = await conn.fetchval(
        f"EXPLAIN (FORMAT JSON) EXECUTE {_statement(held).get_name()}({args})"
    )
    found: set[str] = set()
    for node in nodes(json.loads(text)):
        if node.get("Relation Name") == "jobs":
            found.add(node["Node Type"])
        if str(node.get("Index Name", "")).startswith("jobs_"):
            found.add(node["Index Name"])  # a bitmap index scan names no relation
    return found


async def _generic(held: db.held.Held) -> int:
    n: int = await held.conn.fetchval(
        "SELECT generic_plans FROM pg_prepared_statements WHERE name = $1",
        _statement(held).get_name(),
    )
    return n


async def test_a_plan_made_on_an_empty_queue_is_made_anew_for_a_backlog(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    await pool.execute(sql.statement("maintenance/analyze"))  # statistics: an empty table
    held = db.held.Held(pool)
    try:
        await _replanned(held, pool, monkeypatch)
    finally:
        await held.close()


async def _replanned(held: db.held.Held, pool: asyncpg.Pool, monkeypatch: Any) -> None:
    # The idle worker polls: past five executions the statement runs a generic plan,
    # made for an empty table, which reads the table by a sequential scan.
    for _ in range(8):
        assert await _claim(held) == 0
    assert await _generic(held) > 0
    assert "Seq Scan" in await _scans(held)
    first = _statement(held).get_name()

    # A backlog arrives (no ANALYZE, as on a server whose autovacuum is off).
    specs = [JobSpec("k", "{}", 1, None, None, None, 25) for _ in range(5_000)]
    await db.enqueue.job_insert_many(pool, schema="venturi", specs=specs)
    assert await _claim(held) == 10
    # A full claim asks for a replan; a plan younger than REPLAN_AFTER is kept.
    assert await _claim(held, replan=True) == 10
    assert _statement(held).get_name() == first

    monkeypatch.setattr(db.held, "REPLAN_AFTER", 0.0)
    assert await _claim(held, replan=True) == 10
    assert _statement(held).get_name() != first
    for _ in range(6):
        assert await _claim(held) == 10
    # The new generic plan is made from the table as it is: it reads the backlog by an
    # index and the claimed rows by the primary key. (Which index: without statistics of
    # the backlog, the planner may take jobs_kind_id_idx and sort, benchmarks finding 2;
    # an ANALYZE, autovacuum's or venturi's, gives it jobs_claim_idx.)
    assert await _generic(held) > 0
    scans = await _scans(held)
    assert "Seq Scan" not in scans
    assert "jobs_pkey" in scans
    assert scans & {"jobs_claim_idx", "jobs_kind_id_idx"}


async def test_without_a_statement_cache_the_claim_is_a_plain_statement(
    dsn: str,
) -> None:
    # Behind a transaction pooler a named statement would not outlive its transaction.
    pool = await db.connect.create_pool(dsn, pooled=True, min_size=1, max_size=1)
    try:
        assert not db.connect.caches_statements(pool)
        held = db.held.Held(pool, prepare=db.connect.caches_statements(pool))
        await db.enqueue.job_insert_many(
            pool, schema="venturi", specs=[JobSpec("k", "{}", 1, None, None, None, 25)]
        )
        try:
            assert await _claim(held, replan=True) == 1
            assert held._plans == {}
        finally:
            await held.close()
    finally:
        await pool.close()
    own = await db.connect.create_pool(dsn, min_size=1, max_size=1)
    try:
        assert db.connect.caches_statements(own)
    finally:
        await own.close()


async def test_a_statement_gone_from_the_server_is_prepared_again(pool: asyncpg.Pool) -> None:
    held = db.held.Held(pool)
    try:
        await db.enqueue.job_insert_many(
            pool, schema="venturi", specs=[JobSpec("k", "{}", 1, None, None, None, 25)] * 2
        )
        assert await _claim(held, limit=1) == 1
        gone = _statement(held).get_name()
        # Someone ran DEALLOCATE on the session (a pooler's reset, an operator).
        await held.conn.execute(f"DEALLOCATE {gone}")
        assert await _claim(held, limit=1) == 1
        assert _statement(held).get_name() != gone
    finally:
        await held.close()


async def _generic_indexes(conn: asyncpg.Connection, statement: str, *args: Any) -> set[str]:
    """The indexes of ``statement``'s generic plan (the one a held statement keeps)."""
    plan = await generic_plan(conn, statement, *args)
    return {str(n["Index Name"]) for n in plan if "Index Name" in n}


async def test_completions_reach_their_rows_by_the_primary_key_whatever_the_statistics(
    conn: asyncpg.Connection,
) -> None:
    # Statistics taken while nothing was claimed; then the fleet holds 500 jobs. A plan
    # that read jobs_stale_idx for the completions would read all 500 at every claim.
    specs = [JobSpec("k", "{}", 1, None, None, None, 25) for _ in range(20_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs)
    await conn.execute(sql.statement("maintenance/analyze"))
    fleet = db.Claimant("fleet")
    held = (
        await db.claims.job_claim(
            conn, schema="venturi", claimant=fleet, kinds=["k"], leases=[900.0], floor=0, limit=500
        )
    ).claimed
    assert len(held) == 500
    ids, attempts = [r["id"] for r in held[:10]], [r["attempt"] for r in held[:10]]
    token = fleet.token
    claim = await _generic_indexes(
        conn, "job_claim", "w", ["k"], [60.0], 0, 10, ids, attempts, [None] * 10, token, True
    )
    assert "jobs_stale_idx" not in claim
    assert {"jobs_pkey", "jobs_claim_idx"} <= claim
    complete = await _generic_indexes(
        conn, "job_complete_many_if_owned", token, ids, attempts, [None] * 10, True
    )
    assert complete == {"jobs_pkey"}, complete
    # The heartbeat renews the same way: every tick, for every job the worker runs.
    beat = await _generic_indexes(conn, "job_heartbeat_if_owned", token, ids, attempts, [60.0] * 10)
    assert "jobs_stale_idx" not in beat, beat
    # And every other settlement of one run (one job, or a batch of waits) by its id.
    one, attempt = ids[0], attempts[0]
    settlements: dict[str, tuple[Any, ...]] = {
        "job_fail_if_owned": (token, one, attempt, "failed", "e", None, 1.0, False, None),
        "job_dead_if_owned": (token, one, attempt, "e"),
        "job_cancel_if_owned": (token, one, attempt, "e"),
        "job_release_if_owned": (token, one, attempt, "e"),
        "job_pause_if_owned": (token, one, attempt, "{}", None, 1.0),
        "job_wait_if_owned": (token, one, attempt, 0, None, "go", None, "e"),
        "job_wait_many_if_owned": (
            token,
            ids,
            attempts,
            [0] * 10,
            [None] * 10,
            ["go"] * 10,
            [None] * 10,
            ["e"] * 10,
        ),
    }
    read = {name: await _generic_indexes(conn, name, *args) for name, args in settlements.items()}
    assert all(indexes == {"jobs_pkey"} for indexes in read.values()), read


def _grouped_claim_args(kind: str) -> tuple[Any, ...]:
    token = db.Claimant("w").token
    return ("w", kind, 60.0, 0, 32, token, None, None, None, None, True, [], [], [])


def _bounded_on_the_way(plan: Any, leaf: Any) -> list[float]:
    """For each node ``leaf`` accepts, the least row estimate of the Limit nodes above it
    (inf without one)."""
    found: list[float] = []

    def walk(node: dict[str, Any], limits: list[float]) -> None:
        if node.get("Node Type") == "Limit":
            limits = [*limits, float(node["Plan Rows"])]
        if leaf(node):
            found.append(min(limits, default=float("inf")))
        for child in node.get("Plans", []):
            walk(child, limits)

    walk(plan, [])
    return found


async def test_the_grouped_claim_is_planned_for_its_bounds_not_a_tenth_of_a_backlog(
    conn: asyncpg.Connection,
) -> None:
    # The planner cannot see the batch nor a group's room, and takes a LIMIT of either for
    # a tenth of the rows below it. Behind one group's million jobs that priced the
    # generic plan past jit_above_cost, and each claim compiled it (150 ms a claim where
    # it took 5; benchmarks/JOURNAL.md, the fifteenth session). The claim's constant
    # bounds cap the estimates, whatever the tables hold.
    # One hot group of 250,000 pending jobs beside a cold one: each group's next jobs
    # were planned as 8,333 (a tenth of the 83,333 the statistics give a group).
    await conn.execute(tsql("group_backlog_seed"), "gk", "hot", 250_000)
    await conn.execute(tsql("group_backlog_seed"), "gk", "cold", 1)
    await conn.execute(sql.statement("maintenance/analyze"))
    plan = await generic_plan(conn, "job_claim_grouped", *_grouped_claim_args("gk"))
    # picks: a group's next jobs, numbered (the statement's one window function).
    picked = [float(n["Plan Rows"]) for n in plan if n.get("Node Type") == "WindowAgg"]
    assert picked and max(picked) <= 101, picked

    # 20,000 ready groups of another kind: each scan that locks them was planned as 673
    # (a tenth of the 6,733 the statistics leave under their caps).
    await conn.execute(tsql("groups_ready_seed"), "gr", 20_000)
    await conn.execute(sql.statement("maintenance/group_analyze"))
    plan = await generic_plan(conn, "job_claim_grouped", *_grouped_claim_args("gr"))
    top = next(n for n in plan if "Node Type" in n)
    locked = _bounded_on_the_way(
        top,
        lambda n: n.get("Node Type") == "LockRows" and "groups_ready_idx" in json.dumps(n),
    )
    assert locked and max(locked) <= 500, locked
