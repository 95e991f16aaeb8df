"""A slow claim into a backlog analyzes the live table when its statistics are stale
(venturi.runtime.statistics): a burst into a never-analyzed queue is analyzed by its
worker's slow claims; fast claims, fresh statistics and a role that does not own the table
leave it alone. (Since migration 21 the claim's plan reads the claim index even before the
analyze: the check is kept for plans that still misjudge a backlog.)"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_stat
from tests.support.plans import generic_plan
from tests.support.roles import not_owner_dsn
from tests.support.sql import statement as tsql
from venturi import Context, db, sql
from venturi.runtime import statistics
from venturi.runtime.instruments import Instruments
from venturi.runtime.statistics import Statistics
from venturi.runtime.worker import Worker


def _task(kind: str) -> venturi.Task[Any]:
    @venturi.task(kind=kind)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def _analyzed(conn: asyncpg.Connection) -> int:
    return int((await conn.fetchrow(tsql("jobs_analyze_stats")))["analyze_count"])


async def _burst(dsn: str, task: venturi.Task[Any], n: int) -> None:
    """Enqueue ``n`` jobs in one transaction on a connection of its own, closed after: a
    closing session hands its row counts to the statistics at once."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            for start in range(0, n, 10_000):
                await venturi.enqueue_many(
                    conn, [task.job(Item(i)) for i in range(start, min(n, start + 10_000))]
                )
    finally:
        await conn.close()


async def _claim_plan(conn: asyncpg.Connection, kind: str, one: bool = False) -> set[str]:
    """The node types and indexes of the claim's generic plan (``one``: job_claim_one's,
    an idle worker's), as a worker's prepared statement would have it now."""
    if one:
        plan = await generic_plan(conn, "job_claim_one", "t", [kind], [60.0], uuid.uuid4(), True)
    else:
        plan = await generic_plan(
            conn, "job_claim", "t", [kind], [60.0], 0, 10, [], [], [], uuid.uuid4(), True
        )
    found: set[str] = set()
    for node in plan:
        if "Node Type" in node:
            found.add(node["Node Type"])
        if str(node.get("Index Name", "")).startswith("jobs_"):
            found.add(node["Index Name"])
    return found


async def test_a_burst_into_a_never_analyzed_queue_is_analyzed_by_its_slow_claims(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _task("stats_burst")
    before = await _analyzed(conn)
    await _burst(dsn, task, 30_000)
    # Since migration 21 (the claim index holds the jobs without a group only) the
    # claim's generic plan reads the claim index even with no statistics: before it,
    # the planner took this backlog for a handful of rows and sorted them all per claim.
    scans = await _claim_plan(conn, task.kind)
    assert "jobs_claim_idx" in scans
    assert "Sort" not in scans
    # The check stays for the plans that still misjudge a backlog: here every full claim
    # counts as slow, so the worker's claims run it against the never-analyzed table.
    monkeypatch.setattr(statistics, "SLOW_CLAIM", 0.0)
    worker = Worker(None, dsn, [task], concurrency=8, poll_max=0.5)
    async with running(worker):
        await wait_stat(worker, "analyzed", 1, within=60)
    assert await _analyzed(conn) == before + worker.stats["analyzed"]
    # Analyzed, the claim still reads the first rows of the claim index.
    scans = await _claim_plan(conn, task.kind)
    assert "jobs_claim_idx" in scans
    assert "Sort" not in scans


async def test_an_idle_workers_claim_planned_on_an_empty_queue_analyzes_a_burst(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The table analyzed while empty; an idle worker polls it, so its claim of one job
    # (job_claim_one) keeps a generic plan made for an empty table, which reads the
    # table by a sequential scan and sorts it once a burst arrives.
    task = _task("stats_one")
    await conn.execute(sql.statement("maintenance/analyze"))
    before = await _analyzed(conn)
    worker = Worker(None, dsn, [task], concurrency=4, poll_max=0.05)
    async with running(worker):
        await wait_stat(worker, "empty_claims", 8)
        await _burst(dsn, task, 30_000)
        # Its first claims into the burst are slow: they look at the statistics, find
        # them stale and analyze the table, which makes PostgreSQL plan them anew.
        await wait_stat(worker, "analyzed", 1, within=60)
    assert await _analyzed(conn) >= before + 1
    scans = await _claim_plan(conn, task.kind, one=True)
    assert "jobs_claim_idx" in scans and "jobs_pkey" in scans
    assert "Seq Scan" not in scans and "Sort" not in scans


async def test_only_a_slow_full_claim_looks_and_only_a_misjudged_backlog_is_analyzed(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _task("stats_direct")
    await _burst(dsn, task, 3_000)
    watch = Statistics("venturi", Instruments(prometheus=False))
    before = await _analyzed(conn)
    # A claim that came back short (no backlog), or fast: nothing is read.
    await watch.after_claim(conn, full=False, took=1.0)
    await watch.after_claim(conn, full=True, took=statistics.SLOW_CLAIM / 2)
    assert watch.jobs.checked_at == float("-inf")
    # Slow and full, and the planner believes in no backlog (never analyzed) while 3,000
    # are pending, more than MINIMUM: analyzed.
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.stats["analyzed"] == 1
    assert await _analyzed(conn) == before + 1
    # Looked at most every CHECK_EVERY seconds.
    await _burst(dsn, task, 4_000)
    looked = watch.jobs.checked_at
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.jobs.checked_at == looked
    # Past it: 7,000 pending, within 2 x 3,000 + 2,000 of the belief: looked, left.
    monkeypatch.setattr(statistics, "CHECK_EVERY", 0.0)
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.jobs.checked_at > looked
    assert watch.stats["analyzed"] == 1
    # 23,000 pending is past that bound: analyzed.
    await _burst(dsn, task, 16_000)
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.stats["analyzed"] == 2
    # A belief of ENOUGH or more is never questioned, however large the backlog grows.
    await _burst(dsn, task, 60_000)
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.stats["analyzed"] == 2
    # Below ENOUGH it would have been: the same backlog against a smaller bound.
    monkeypatch.setattr(statistics, "ENOUGH", 10**9)
    await watch.after_claim(conn, full=True, took=1.0)
    assert watch.stats["analyzed"] == 3
    assert await _analyzed(conn) == before + 3


async def test_a_role_that_does_not_own_the_table_says_so_once_and_does_not_analyze(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    task = _task("stats_not_owner")
    await _burst(dsn, task, 3_000)
    as_other = await not_owner_dsn(conn, dsn)
    other = await asyncpg.connect(as_other)
    before = await _analyzed(conn)
    watch = Statistics("venturi", Instruments(prometheus=False))
    try:
        with caplog.at_level(logging.WARNING, logger="venturi.worker"):
            await watch.after_claim(other, full=True, took=1.0)
            watch.jobs.checked_at = float("-inf")
            await watch.after_claim(other, full=True, took=1.0)
    finally:
        await other.close()
    said = [r.getMessage() for r in caplog.records if "cannot ANALYZE" in r.getMessage()]
    assert len(said) == 1
    assert said[0].startswith("the claims are slow and the statistics of venturi.jobs are stale")
    assert watch.stats["analyzed"] == 0
    assert await _analyzed(conn) == before


async def _groups_analyzed(conn: asyncpg.Connection) -> int:
    return int((await conn.fetchrow(tsql("groups_analyze_stats")))["analyze_count"])


async def _grouped_burst(dsn: str, task: venturi.Task[Any], n: int) -> None:
    """``n`` jobs, each in a group first seen, and the claims of none that apply their
    wake-ups: ``n`` ready groups the planner has never been told of."""
    conn = await asyncpg.connect(dsn)
    try:
        await venturi.enqueue_many(conn, [task.job(Item(i), group=f"g{i}") for i in range(n)])
        limits = db.groups.GroupLimits(1, None, None)
        while True:
            claim, _ = await db.groups.claim_grouped(
                conn,
                schema="venturi",
                claimant=db.Claimant("t"),
                kind=task.kind,
                lease=60.0,
                floor=0,
                limit=0,
                limits=limits,
            )
            if not claim.woken:
                return
    finally:
        await conn.close()


async def _reads_every_ready_group(conn: asyncpg.Connection, kind: str) -> bool:
    """Whether the grouped claim's generic plan reads the ready groups by a bitmap (all
    of them, then sorted) rather than the first few from groups_ready_idx in order."""
    plan = await generic_plan(
        conn, "job_claim_grouped", "t", kind, 60.0, 0, 32, uuid.uuid4(), 1, None, None,
        None, True, [], [], [],
    )  # fmt: skip
    return any(
        n.get("Relation Name") == "groups" and n["Node Type"] == "Bitmap Heap Scan" for n in plan
    )


async def test_a_burst_into_groups_first_seen_is_analyzed_by_its_slow_grouped_claims(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    @venturi.task(kind="stats_groups", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    await _grouped_burst(dsn, handler, 10_000)
    before = await _groups_analyzed(conn)
    # 10,000 ready groups the planner takes for none: the claim reads them all and
    # sorts them (13-17 ms a claim on the benchmark machine, against 4 once analyzed).
    assert await _reads_every_ready_group(conn, handler.kind)
    monkeypatch.setattr(statistics, "SLOW_CLAIM", 0.0)  # every full claim looks
    worker = Worker(None, dsn, [handler], concurrency=8, poll_max=0.5)
    async with running(worker):
        await wait_stat(worker, "analyzed_groups", 1, within=60)
    assert await _groups_analyzed(conn) == before + worker.stats["analyzed_groups"]
    assert not await _reads_every_ready_group(conn, handler.kind)


async def test_only_a_slow_full_grouped_claim_looks_and_only_unknown_ready_groups_analyze(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _task("stats_groups_direct")
    await _grouped_burst(dsn, task, 3_000)
    watch = Statistics("venturi", Instruments(prometheus=False))
    before = await _groups_analyzed(conn)
    await watch.after_grouped_claim(conn, full=False, took=1.0)
    await watch.after_grouped_claim(conn, full=True, took=statistics.SLOW_CLAIM / 2)
    assert watch.groups.checked_at == float("-inf")
    # 3,000 ready groups, more than MINIMUM, where the planner believes in none: analyzed.
    await watch.after_grouped_claim(conn, full=True, took=1.0)
    assert (watch.stats["analyzed_groups"], watch.stats["analyzed"]) == (1, 0)
    # Analyzed, they are known: looked again (past CHECK_EVERY), left alone.
    monkeypatch.setattr(statistics, "CHECK_EVERY", 0.0)
    await watch.after_grouped_claim(conn, full=True, took=1.0)
    assert watch.stats["analyzed_groups"] == 1
    assert await _groups_analyzed(conn) == before + 1
