"""The dashboard's search index (migration 16): the maintenance pass that fills it off the
worker's path, and a search that answers the same whether a job is indexed or not."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support.opsdata import S, make
from venturi import admin, db, sql
from venturi.cli.worker import default_maintenance
from venturi.maintenance import History, SearchIndex, Vacuum


async def indexed(conn: Any) -> tuple[list[int], Any, int]:
    """The job ids the index holds and its watermark."""
    rows = await conn.fetch(sql.statement("maintenance/job_search_indexed", S))
    return [r["job_id"] for r in rows if r["job_id"] is not None], *rows[0][1:]


async def die(conn: Any, kind: str, error: str) -> None:
    """Claim the kind's one due job and fail it for good with ``error``."""
    me = db.Claimant("w9:9")
    [row] = (
        await db.claims.job_claim(
            conn,
            schema=S,
            claimant=me,
            kinds=[kind],
            leases=[60.0],
            floor=0,
            limit=1,
        )
    ).claimed
    status = await db.settle.job_fail_if_owned(
        conn,
        schema=S,
        claimant=me,
        job_id=row["id"],
        attempt=row["attempt"],
        event="failed",
        error=error,
        carry=None,
        delay=0.0,
        force_dead=True,
    )
    assert status == "dead"


async def found(conn: Any, query: str, **filters: Any) -> list[int]:
    page = await admin.search_jobs(conn, admin.JobFilter(search=query, **filters), schema=S)
    assert page.total == len(page.rows)
    return sorted(r.id for r in page.rows)


async def test_a_pass_indexes_finished_jobs_only_and_moves_the_watermark(
    conn: asyncpg.Connection,
) -> None:
    done = [await make(conn, "mail", "completed") for _ in range(3)]
    dead = await make(conn, "fetch", "dead")
    claimed = await make(conn, "fetch", "claimed")
    await make(conn, "fetch", "failed")
    await make(conn, "mail", "pending")
    [cancelled] = [
        c.id
        for c in await admin.cancel_jobs(conn, [await make(conn, "other", "pending")], schema=S)
    ]
    ids, _, last_id = await indexed(conn)
    assert (ids, last_id) == ([], 0)  # nothing indexed: the watermark at -infinity
    first = await admin.index_search(conn, batch=2, margin=0.0, schema=S)
    assert first == admin.Indexed(5, True)
    ids, _, last_id = await indexed(conn)
    assert ids == sorted([*done, dead, cancelled])
    assert last_id == cancelled  # the last to finish
    # Idempotent: nothing new, nothing done; a job finished since is the next pass's one.
    assert await admin.index_search(conn, margin=0.0, schema=S) == admin.Indexed(0, True)
    later = await make(conn, "report", "completed")
    assert await admin.index_search(conn, margin=0.0, schema=S) == admin.Indexed(1, True)
    assert (await indexed(conn))[0] == sorted([*done, dead, cancelled, later])
    assert claimed not in (await indexed(conn))[0]


HOSTILE = "'); DROP TABLE venturi.jobs; -- <b>x</b> \\ %_ 'a''b"


async def results(conn: Any, queries: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Every query's pages (from the newest, from a middle cursor both ways, 7 a page),
    totals and bulk count: what the operator sees."""
    seen: list[Any] = []
    for query, filters in queries:
        wanted = admin.JobFilter(search=query, **filters)
        cursor: int | None = None
        for _ in range(3):
            page = await admin.search_jobs(conn, wanted, before=cursor, limit=7, schema=S)
            seen.append((query, [r.id for r in page.rows], page.total, page.capped, page.newer))
            if page.older is None:
                break
            cursor = page.older
        for way in ({"before": 12_000}, {"after": 12_000}, {"after": 23_990}):
            page = await admin.search_jobs(conn, wanted, limit=7, schema=S, **way)
            seen.append((query, way, [r.id for r in page.rows], page.older, page.newer))
        matching = await admin.count_matching(conn, search=query, schema=S, **filters)
        seen.append((query, matching.jobs, matching.newest_id))
    return seen


async def test_a_search_answers_the_same_whether_its_jobs_are_indexed_or_not(
    conn: asyncpg.Connection,
) -> None:
    # 24,000 jobs (a window of the index is 20,000): 94% completed, 2% dead with an error
    # "upstream refused <n>", 1% cancelled, 3% pending or claimed; a URL in every carry.
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk", S), 24_000, 3600.0)
    queries: list[tuple[str, dict[str, Any]]] = [
        ("upstream", {}),  # 2%, indexed dead jobs only
        ("upstream", {"status": "dead"}),
        ("example.com", {"status": "dead", "kind": "kind_2"}),
        ("example.com", {"status": "pending"}),  # not indexed at all
        ("https", {"status": "claimed"}),
        ("refused 23959", {}),  # one dead job's error
        ("order-600", {}),  # one key
        ("order-600", {"key": "order-600"}),
        ("rare", {}),  # a kind's prefix and its word
        ("kind_", {}),  # the prefix of every kind
        ("kind_3 upstream", {}),
        ("nothing matches this", {}),
        ("7", {}),  # a word of some URLs, keys and errors
        (HOSTILE, {}),
    ]
    unindexed = await results(conn, queries)
    assert sum(1 for r in unindexed if len(r) == 5 and r[1]) > 20  # pages that hold jobs
    # One batch: the oldest finished jobs indexed, the rest read row by row.
    part = await admin.index_search(conn, batch=5000, budget=0.0, margin=0.0, schema=S)
    assert part == admin.Indexed(5000, False)
    assert await results(conn, queries) == unindexed
    # All of them (beyond one window: the GIN index serves the words the window lacks).
    rest = await admin.index_search(conn, margin=0.0, schema=S)
    assert rest.caught_up and part.jobs + rest.jobs == len((await indexed(conn))[0]) > 20_000
    assert await results(conn, queries) == unindexed


async def test_retry_delete_and_purge_keep_the_index_true(conn: asyncpg.Connection) -> None:
    first = await make(conn, "fetch", "dead")  # "upstream refused" in its error
    other = await make(conn, "mail", "completed", carry='{"sku": "walnut"}')
    gone = await make(conn, "mail", "completed", carry='{"sku": "walnut"}')
    assert (await admin.index_search(conn, margin=0.0, schema=S)).jobs == 3
    assert await found(conn, "upstream") == [first]
    # Retried, the job is pending again: found once, row by row, not by its old words.
    await admin.retry_jobs(conn, [first], schema=S)
    assert await found(conn, "upstream") == [first]
    assert await found(conn, "upstream", status="dead") == []
    # Dead again with another error: its old words no longer find it, indexed or not.
    await die(conn, "fetch", "ValueError: hazelnut")
    assert await found(conn, "upstream") == []
    assert await found(conn, "hazelnut", status="dead") == [first]
    assert (await admin.index_search(conn, margin=0.0, schema=S)).jobs == 1
    assert await found(conn, "upstream") == []
    assert await found(conn, "hazelnut", status="dead") == [first]
    # Deleted and purged jobs leave the index with their rows.
    await admin.delete_jobs(conn, [gone], schema=S)
    assert await found(conn, "walnut") == [other]
    assert await admin.purge(conn, status="completed", older_than=0.0, schema=S) == 1
    assert await found(conn, "walnut") == []
    assert (await indexed(conn))[0] == [first]


async def test_concurrent_passes_index_each_job_once_and_a_locked_pass_waits_for_none(
    dsn: str, conn: asyncpg.Connection
) -> None:
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk", S), 6000, 3600.0)
    finished = await admin.count_matching(conn, status="completed", schema=S)
    others = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        passes = await asyncio.gather(
            *(admin.index_search(c, batch=500, margin=0.0, schema=S) for c in others)
        )
        ids, _, _ = await indexed(conn)
        dead = await admin.count_matching(conn, status="dead", schema=S)
        cancelled = await admin.count_matching(conn, status="cancelled", schema=S)
        total = finished.jobs + dead.jobs + cancelled.jobs
        # Each batch indexed jobs the others did not: the sum is every finished job once.
        assert sum(p.jobs for p in passes) == len(ids) == len(set(ids)) == total
        assert all(p.caught_up for p in passes)
        # While a batch holds the watermark, another pass returns at once, having done
        # nothing (no wait, so no deadlock with it).
        await make(conn, "late", "completed")
        async with others[0].transaction():
            horizon = await db.search.job_search_horizon(
                others[0], schema=S, patience=600.0, margin=0.0
            )
            row = await db.search.job_search_index_batch(
                others[0], schema=S, horizon=horizon, batch=10
            )
            assert (row["indexed"], row["locked"]) == (1, True)
            assert await admin.index_search(others[1], margin=0.0, schema=S) == admin.Indexed(
                0, True
            )
        assert len((await indexed(conn))[0]) == total + 1
    finally:
        for c in others:
            await c.close()


async def test_a_job_finished_in_a_transaction_still_open_is_indexed_once_it_commits(
    dsn: str, conn: asyncpg.Connection
) -> None:
    slow = await asyncpg.connect(dsn)
    try:
        async with slow.transaction():
            # Its finished_at is this transaction's start, before the job below.
            early = await make(slow, "slow", "completed", carry='{"word": "pecan"}')
            later = await make(conn, "fast", "completed", carry='{"word": "pecan"}')
            # The pass stops before the open transaction's start: the later job waits.
            assert await admin.index_search(conn, margin=0.0, schema=S) == admin.Indexed(0, True)
            assert await found(conn, "pecan") == [later]
        assert await found(conn, "pecan") == [early, later]
        assert await admin.index_search(conn, margin=0.0, schema=S) == admin.Indexed(2, True)
        assert (await indexed(conn))[0] == [early, later]
        assert await found(conn, "pecan") == [early, later]
    finally:
        await slow.close()


def test_venturi_worker_runs_the_search_index_and_its_settings_are_checked() -> None:
    assert [type(t) for t in default_maintenance([])] == [SearchIndex, History, Vacuum]
    task = SearchIndex(interval=5, batch=100, budget=0.5, patience=60)
    assert (task.interval, task.batch, task.budget, task.patience) == (5.0, 100, 0.5, 60.0)
    for bad in ({"batch": 0}, {"interval": -1}, {"budget": "x"}):
        with pytest.raises(venturi.ConfigError):
            SearchIndex(**bad)


async def test_the_task_indexes_and_a_lost_connection_is_one_line_not_a_failure(
    dsn: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    done = await make(conn, "mail", "completed")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=3)
    try:
        worker = venturi.Worker(None, pool, [])
        await SearchIndex(budget=1.0).run(pool, worker)
        # Its margin (a second) may leave the job for a later run: once due, it is indexed.
        assert worker.stats["search_indexed"] in (0, 1)
    finally:
        await pool.close()
    # A pool whose connections are gone: the run says so in one line and returns (each
    # batch is its own transaction; the next run resumes from the watermark).
    with caplog.at_level("WARNING", logger="venturi.search"):
        await SearchIndex().run(pool, worker)
    assert worker.stats["search_index_interrupted"] == 1
    [record] = [r for r in caplog.records if r.name == "venturi.search"]
    assert "pass interrupted" in record.getMessage() and record.exc_info is None
    assert await admin.index_search(conn, margin=0.0, schema=S) in (
        admin.Indexed(1, True),
        admin.Indexed(0, True),
    )
    assert (await indexed(conn))[0] == [done]
