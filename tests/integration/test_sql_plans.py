"""The rendered SQL on a real server: every statement prepares against the schema, the
schema applies with psql, and the claim, the recovery and the dashboard's reads use
their indexes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from typing import Any

import asyncpg
import pytest

from tests.support.plans import nodes
from venturi import JobSpec, admin, db, sql

# The claimant of the jobs these tests claim and settle through the store.
W1 = db.Claimant("w:1")


def _index_names(plan: Any) -> set[str]:
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


def _node_types(plan: Any) -> set[str]:
    return {n["Node Type"] for n in nodes(plan) if "Node Type" in n}


def _seq_scanned(plan: Any) -> set[str]:
    """The tables a plan reads by a sequential scan."""
    return {n["Relation Name"] for n in nodes(plan) if n.get("Node Type") == "Seq Scan"}


async def _plan(conn: asyncpg.Connection, name: str, *args: Any) -> Any:
    # Plain EXPLAIN (no ANALYZE): plans the statement with its real parameters, runs nothing.
    plan_text = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) " + sql.statement(name).rstrip().rstrip(";"), *args
    )
    return json.loads(plan_text)


async def _explain(conn: asyncpg.Connection, name: str, *args: Any) -> set[str]:
    return _index_names(await _plan(conn, name, *args))


async def test_every_statement_prepares_against_the_schema(conn: asyncpg.Connection) -> None:
    for name in sql.statement_names():
        prepared = await conn.prepare(sql.statement(name))
        assert len(prepared.get_parameters()) == len(sql._params(sql.statement(name))), name


async def test_rendered_sql_applies_with_psql(empty_dsn: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed on this machine")
    text = sql.render("venturi", "all")
    for _ in range(2):  # a second application is harmless
        out = await asyncio.to_thread(
            subprocess.run,
            [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", empty_dsn],
            input=text,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert (
            await db.schema.schema_version(conn, schema="venturi") == sql.migrations()[-1].version
        )
    finally:
        await conn.close()


async def test_claim_and_recovery_use_their_partial_indexes(conn: asyncpg.Connection) -> None:
    # 10,000 rows through the library's own statements: 8,000 completed, 1,000 claimed
    # with a live lease, 1,000 pending, over five kinds and three priorities.
    specs = [JobSpec(f"k{i % 5}", "{}", i % 3, None, None, None, 25) for i in range(10_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs)
    kinds = [f"k{i}" for i in range(5)]
    rows = (
        await db.claims.job_claim(
            conn,
            schema="venturi",
            claimant=W1,
            kinds=kinds,
            leases=[3600.0] * 5,
            floor=0,
            limit=9_000,
        )
    ).claimed
    done = rows[:8_000]
    await db.settle.job_complete_many_if_owned(
        conn,
        schema="venturi",
        claimant=W1,
        ids=[r["id"] for r in done],
        attempts=[r["attempt"] for r in done],
        results=[None] * len(done),
    )
    await conn.execute(sql.statement("maintenance/analyze"))
    claim = await _explain(
        conn,
        "job_claim",
        "me:1",
        ["k1", "k2"],
        [60.0, 60.0],
        0,
        4,
        [],
        [],
        [],
        W1.token,
        True,
    )
    assert "jobs_claim_idx" in claim
    # Recovery is a statement of its own (the worker's timer), never the claim's work.
    assert "jobs_stale_idx" not in claim
    recover = await _explain(conn, "job_recover_stale", "me:1", 1.0, 2.0, 3600.0, True)
    assert "jobs_stale_idx" in recover
    nxt = await _explain(conn, "job_next_visible_at", ["k1", "k2"], ["k1", "k2"], ["k2"])
    assert "jobs_next_visible_idx" in nxt


async def test_a_plain_enqueue_writes_no_wake_up_entry(conn: asyncpg.Connection) -> None:
    # Migration 18: jobs visible from their creation never enter jobs_next_visible_idx
    # (nothing to wake for), scheduled ones do, and the idle worker's lookup finds those.
    async def entries() -> int:
        # The index-only count of the index's entries, by the predicate that matches it.
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM venturi.jobs WHERE status = 'pending' AND kind = 'k' "
                "AND visible_at > created_at"
            )
        )

    now = [JobSpec("k", "{}", 1, None, None, None, 25) for _ in range(1_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=now)
    size = "SELECT pg_relation_size('venturi.jobs_next_visible_idx')"
    assert await conn.fetchval(size) == 8192  # the metapage alone: no entry written
    assert await entries() == 0
    nxt = (await db.claims.job_next_visible_at(conn, schema="venturi", kinds=["k"])).visible_at
    assert nxt is None
    later = [JobSpec("k", "{}", 1, None, 60.0 + i, None, 25) for i in range(3)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=later)
    assert await conn.fetchval(size) > 8192 and await entries() == 3
    nxt = (await db.claims.job_next_visible_at(conn, schema="venturi", kinds=["k"])).visible_at
    first = await conn.fetchval(
        "SELECT min(visible_at) FROM venturi.jobs WHERE kind = 'k' AND visible_at > now()"
    )
    assert first is not None and nxt == first


async def test_claim_keeps_its_index_on_a_backlog_of_one_kind(conn: asyncpg.Connection) -> None:
    # One distinct kind: a row filter on kinds (such as "kind <> ALL (paused)") makes the
    # planner expect no match and sort the whole backlog; the claim must stay an ordered
    # index scan under generic and custom plans alike.
    specs = [JobSpec("only", "{}", 1, None, None, None, 25) for _ in range(20_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs)
    await conn.execute(sql.statement("maintenance/analyze"))
    args: tuple[Any, ...] = ("me:1", ["only"], [60.0], 0, 10, [], [], [], W1.token, True)
    for mode in ("force_custom_plan", "force_generic_plan"):
        await conn.execute(f"SET plan_cache_mode = {mode}")
        plan = await _plan(conn, "job_claim", *args)
        assert {"jobs_claim_idx", "jobs_pkey"} <= _index_names(plan), mode
        # The generic plan does not know how many rows the claim takes: it must still
        # reach them by index, never by reading the table (a hash join over every row
        # cost 20 ms per claim at 100,000 pending).
        assert "jobs" not in _seq_scanned(plan), mode
        # An idle worker's claim of one job: the first entry of the same index.
        one = await _plan(conn, "job_claim_one", "me:1", ["only"], [60.0], W1.token, True)
        assert {"jobs_claim_idx", "jobs_pkey"} <= _index_names(one), mode
        assert "jobs" not in _seq_scanned(one) and "Sort" not in _node_types(one), mode
    # And PostgreSQL keeps that generic plan: after its five custom plans, a prepared
    # claim is not planned again (planning was ~60% of the claim's server time).
    await conn.execute("RESET plan_cache_mode")
    claim = await conn.prepare(sql.statement("job_claim"))
    async with conn.transaction():
        for _ in range(8):
            await claim.fetch(*args[:4], 0, *args[5:])
        # The protocol-level statement is listed like any other of this session's.
        plans = await conn.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1",
            claim.get_name(),
        )
    assert plans["custom_plans"] == 5 and plans["generic_plans"] == 3


async def test_dashboard_reads_use_their_indexes(conn: asyncpg.Connection) -> None:
    # 20,000 jobs as the dashboard benchmark seeds them (mostly completed; dead, cancelled,
    # pending, claimed; a rare kind; a third keyed) and their journal, planned in a read
    # transaction of the dashboard's (custom plans, no JIT).
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 20_000, 172_800.0)
    await conn.execute(sql.statement("maintenance/journal_seed_bulk"))
    assert (await admin.index_search(conn, margin=0.0)).jobs == 19_400
    await conn.execute(sql.statement("maintenance/analyze"))
    mark = (await conn.fetchrow(sql.statement("job_search_query"), "x"))[2:]
    async with conn.transaction(readonly=True):
        await conn.execute(sql.statement("maintenance/dashboard_read_settings"))
        # A rare kind: its own index, not a backwards scan of every id (first page or deep).
        assert "jobs_kind_id_idx" in await _explain(
            conn, "job_list", None, "rare", 51, None, None, None
        )
        deep = await _explain(conn, "job_list", None, "rare", 51, None, 15_000, None)
        assert "jobs_kind_id_idx" in deep
        dead = await _explain(conn, "job_list", "dead", None, 51, None, None, None)
        assert "jobs_failed_id_idx" in dead
        keyed = await _explain(conn, "job_list", None, None, 51, "order-300", None, None)
        assert "jobs_key_search_idx" in keyed
        newest = await _explain(conn, "job_list", None, None, 51, None, 12_345, None)
        assert "jobs_pkey" in newest
        # A group's jobs (SPEC 13): its own partial index, not a scan of every id.
        grouped = await _explain(conn, "job_list", None, None, 51, None, None, "acme")
        assert "jobs_grp_id_idx" in grouped
        bulk = await _explain(conn, "job_ids_matching", "cancelled", None, None, 20_000, 500, None)
        assert "jobs_failed_id_idx" in bulk
        charts = await _explain(conn, "job_activity_per_minute", "manual retry", 60)
        assert {"jobs_finished_idx", "journal_at_idx"} <= charts
        overview = await _explain(conn, "job_overview", "manual retry", 3600.0)
        assert {
            "jobs_claim_idx",
            "jobs_waiting_idx",
            "jobs_stale_idx",
            "jobs_finished_idx",
            "journal_at_idx",
        } <= overview
        assert "jobs_stale_idx" in await _explain(conn, "job_list_claimed", 2000)
        # The search box (migration 16): the finished jobs' words by the search index
        # (a window of the newest in order, then GIN), the unfinished ones by the
        # worker's partial indexes, or by id between a full page's end and its cursor.
        rare = await conn.fetchrow(sql.statement("job_search_query"), "order-300")
        searched = (None, None, None, rare["query"], [], rare["patterns"], *mark, None)
        page = await _explain(conn, "job_search_text_older", *searched, None, 51)
        assert {"job_search_pkey", "job_search_doc_idx"} <= page
        assert "job_search_doc_idx" in await _explain(
            conn, "job_search_text_count", *searched, 10_001
        )
        live = await _plan(conn, "job_search_text_live_older", *searched, None, None, 51)
        assert "jobs" not in _seq_scanned(live)
        assert {"jobs_stale_idx", "jobs_waiting_idx", "jobs_finished_idx"} <= _index_names(live)
        bounded = await _explain(conn, "job_search_text_live_older", *searched, None, 19_950, 51)
        assert "jobs_pkey" in bounded
        batch = await _explain(conn, "job_ids_matching_search", *searched, 20_000, 500)
        assert {"job_search_doc_idx", "jobs_stale_idx"} <= batch
        # Without a search, the list's own indexes.
        assert "jobs_failed_id_idx" in await _explain(
            conn, "job_search_older", "dead", None, None, None, 51, None
        )
        assert "jobs_kind_id_idx" in await _explain(
            conn, "job_search_older", None, "rare", None, 9_000, 51, None
        )
        # A kind's trends from the finished index.
        trends = await _explain(conn, "job_activity_of_kind", "kind_3", "manual retry", 60.0, 60)
        assert "journal_at_idx" in trends and {"jobs_finished_idx", "jobs_kind_id_idx"} & trends
        # Retention's workflow guards (a child's parent, a node's dependents) are looked
        # up per candidate; the scan itself stays on the finished jobs' index.
        purge = await _explain(conn, "job_purge_count", "completed", 86_400.0, None)
        assert "jobs_finished_idx" in purge


async def test_workflow_reads_use_the_workflow_tables_never_a_scan_of_jobs(
    conn: asyncpg.Connection,
) -> None:
    # 20,000 plain jobs and 500 sagas (four steps, two children) beside 100 Workflow
    # graphs of three nodes, as benchmarks/scenarios/web_workflows.py seeds them.
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 20_000, 172_800.0)
    await conn.execute(sql.statement("maintenance/workflows_seed_bulk"), 500, 100)
    await conn.execute(sql.statement("maintenance/analyze"))
    root = await conn.fetchval(
        sql.statement("workflow_list_older"), None, "saga_1", None, 1, 10, None
    )
    async with conn.transaction(readonly=True):
        await conn.execute(sql.statement("maintenance/dashboard_read_settings"))
        # The list: a skip scan over the workflow tables (small tables may be read
        # whole); jobs by id only, never scanned.
        for name, cursor in (("workflow_list_older", None), ("workflow_list_newer", 1)):
            for status, kind in ((None, None), ("waiting", None), ("dead", "saga_1")):
                plan = await _plan(conn, name, status, kind, cursor, 51, 1000, None)
                assert "jobs" not in _seq_scanned(plan), (name, status, kind)
                assert {"steps_pkey", "jobs_pkey", "jobs_parent_idx"} <= _index_names(plan)
        # A job's page: its counts and the walk of its graph, by index probes.
        view = await _plan(conn, "job_workflow_view", root, 200, 10_000)
        assert "jobs" not in _seq_scanned(view)
        assert {"jobs_pkey", "jobs_parent_idx", "steps_pkey"} <= _index_names(view)
        walk = await _plan(conn, "workflow_graph_get", root, 200, 1_000)
        assert "jobs" not in _seq_scanned(walk)
        assert {"jobs_pkey", "jobs_parent_idx"} <= _index_names(walk)
