"""The history table (migration 17): finished jobs move out of the live table, and every
read answers the same wherever a job is; retry, delete and retention reach a moved job;
a database that predates the history moves its finished jobs in batches, losing none."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

import venturi
import venturi.testing
import venturi.web
from tests.support import Item, running, wait_stat, wait_status
from tests.support.flows import Flows, run_flows
from tests.support.opsdata import seed
from tests.support.sql import statement as tsql
from venturi import Context, admin, db, sql
from venturi.admin.search import JobFilter
from venturi.errors import ConfigError
from venturi.maintenance import History
from venturi.runtime.worker import Worker

NODE = re.compile(r'class="node n-(\w+)(?: current)?" data-job="(\d+)"')


async def _where(conn: Any) -> dict[str, int]:
    return dict(await conn.fetchrow(tsql("jobs_where")))


async def _move_all(conn: Any) -> int:
    moved = await admin.move_to_history(conn)
    assert moved.caught_up
    return moved.jobs


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


async def test_the_history_and_the_view_have_the_live_tables_columns_in_order(
    conn: asyncpg.Connection,
) -> None:
    # A move is INSERT ... SELECT * of the deleted rows: a column added to jobs and not
    # to jobs_history (or to the view) would shift every column after it.
    rows = await conn.fetch(tsql("table_columns"), ["jobs", "jobs_history", "all_jobs"])
    columns: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        columns.setdefault(r["name"], []).append((r["column"], r["type"]))
    assert len(columns["jobs"]) > 30
    assert columns["jobs_history"] == columns["jobs"]
    assert columns["all_jobs"] == columns["jobs"]


async def _reads(conn: Any, web: httpx.AsyncClient, ids: list[int], flows: Flows) -> dict[str, Any]:
    """What every reader answers: the library, the operator's API, the dashboard's JSON
    and its graphs (the time-dependent figures of the stats left out)."""
    out: dict[str, Any] = {}
    for i in ids:
        out[f"get_job {i}"] = _plain(await venturi.get_job(conn, i))
        out[f"get_journal {i}"] = _plain(await venturi.get_journal(conn, i))
        out[f"get_result {i}"] = _plain(await venturi.get_result(conn, i))
        out[f"show_job {i}"] = _plain(await admin.show_job(conn, i))
        out[f"workflow_view {i}"] = _plain(await admin.workflow_view(conn, i))
        r = await web.get(f"/api/jobs/{i}")
        out[f"/api/jobs/{i}"] = (r.status_code, r.json())
    for wf in (flows.extract, flows.order, flows.gatherer, flows.gate):
        out[f"workflow_graph {wf}"] = _plain(await admin.workflow_graph(conn, wf, drawn=200))
        page = (await web.get(f"/jobs/{wf}")).text
        out[f"/jobs/{wf} nodes"] = sorted(NODE.findall(page))
    for status in (None, "pending", "claimed", "waiting", "completed", "dead", "cancelled"):
        out[f"list_jobs {status}"] = _plain(await admin.list_jobs(conn, status=status, limit=500))
    for kind in ("mail", "fetch"):
        out[f"list_jobs kind {kind}"] = _plain(await admin.list_jobs(conn, kind=kind, limit=500))
        out[f"list_jobs page {kind}"] = _plain(
            await admin.list_jobs(conn, kind=kind, limit=2, before=max(ids))
        )
    for f in (
        JobFilter(search="upstream"),
        JobFilter(search="x.test"),
        JobFilter(status="completed"),
        JobFilter(kind="fetch", search="connectionerror"),
    ):
        out[f"search {f}"] = _plain(await admin.search_jobs(conn, f, limit=500))
    out["/api/jobs"] = (await web.get("/api/jobs?limit=500")).json()
    out["/api/jobs dead"] = (await web.get("/api/jobs?status=dead")).json()
    out["/api/workflows"] = (await web.get("/api/workflows")).json()
    out["stats"] = [
        {k: v for k, v in _plain(s).items() if "seconds" not in k and "rate" not in k}
        for s in (await admin.stats(conn)).kinds
    ]
    out["purge_count"] = await admin.purge_count(conn, status="completed", older_than=0)
    return out


async def test_every_read_answers_the_same_once_finished_jobs_moved(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], web: httpx.AsyncClient
) -> None:
    seeded = await seed(conn)
    flows = await run_flows(dsn, conn)
    [cancelled] = await admin.cancel_jobs(conn, seeded["mail_due"][:1])
    assert cancelled.done
    ids = sorted(
        {i for group in seeded.ids.values() for i in group}
        | {flows.extract, flows.transform, flows.load, flows.order, *flows.ships}
        | {flows.gatherer, *flows.gathered, flows.sleeper, flows.approver, flows.gate}
        | {flows.after_gate}
    )
    before = await _where(conn)
    assert before["live_finished"] >= 10 and before["history"] == 0
    digest = dict(await conn.fetchrow(tsql("jobs_digest"), None))
    answers = await _reads(conn, web, ids, flows)

    moved = await _move_all(conn)

    after = await _where(conn)
    assert moved == before["live_finished"]
    assert after == {"live": before["live"], "live_finished": 0, "history": moved}
    assert dict(await conn.fetchrow(tsql("jobs_digest"), None)) == digest
    again = await _reads(conn, web, ids, flows)
    for name, answer in answers.items():
        assert again[name] == answer, name
    # And once the search index holds the moved jobs too.
    await admin.index_search(conn)
    indexed = await _reads(conn, web, ids, flows)
    for name, answer in answers.items():
        assert indexed[name] == answer, name


def _declare(kind: str) -> venturi.Task[Any]:
    @venturi.task(kind=kind)
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        if carry.n < 0:
            return venturi.dead("negative")
        return venturi.complete(carry.n * 2)

    return handler


async def test_a_retried_job_comes_back_from_the_history_and_runs_again(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("hist_retry")
    job_id = await task.enqueue(conn, Item(-1))
    worker = Worker(None, dsn, [task], poll_max=0.1)
    async with running(worker):
        await wait_status(conn, job_id, "dead")
    assert await _move_all(conn) == 1
    journal = await venturi.get_journal(conn, job_id)

    [change] = await admin.retry_jobs(conn, [job_id], operator="ops")
    assert change.done, change.message
    assert await _where(conn) == {"live": 1, "live_finished": 0, "history": 0}
    info = await venturi.get_job(conn, job_id)
    assert info is not None and info.status == "pending" and info.failures == 0
    assert [e.event for e in await venturi.get_journal(conn, job_id)] == [
        *(e.event for e in journal),
        "retried",
    ]
    # The same row, back where workers claim: this time its carry is fixed by nothing,
    # so it dies again, and moves again.
    async with running(Worker(None, dsn, [task], poll_max=0.1)):
        await wait_status(conn, job_id, "dead")
    assert await _move_all(conn) == 1
    info = await venturi.get_job(conn, job_id)
    assert info is not None and info.status == "dead" and info.attempt == 2


async def test_a_job_retried_from_the_history_keeps_every_column_it_had(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Its group too: a grouped job retried out of the history came back without one, and
    # ran outside its group's cap and rate, unlisted by `venturi jobs list --group`.
    task = _declare("hist_cols")
    job_id = await task.enqueue(conn, Item(1), group="acme", key="k1")
    await admin.cancel_jobs(conn, [job_id])
    assert await _move_all(conn) == 1
    before = dict(await conn.fetchrow("SELECT * FROM venturi.jobs_history WHERE id = $1", job_id))
    [change] = await admin.retry_jobs(conn, [job_id])
    assert change.done, change.message
    after = dict(await conn.fetchrow("SELECT * FROM venturi.jobs WHERE id = $1", job_id))
    # What a retry sets (as for a job retried in the live table).
    changed = {"status", "failures", "visible_at", "finished_at", "result", "cancel_requested_at"}
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k not in changed} == {
        k: v for k, v in before.items() if k not in changed
    }
    assert after["grp"] == "acme" and after["status"] == "pending"
    # Pending in its group again: the group has its wake-up.
    assert await conn.fetchval(
        "SELECT count(*) FROM venturi.group_wakes WHERE kind = 'hist_cols' AND grp = 'acme'"
    )


async def test_delete_and_retention_take_a_moved_jobs_journal_steps_and_signals(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    flows = await run_flows(dsn, conn)
    moved = await _move_all(conn)
    assert moved > 5
    remnants = tsql("job_remnants_count")
    # order: a parent with recorded steps (its spawns), moved to the history.
    order = dict(await conn.fetchrow(remnants, flows.order))
    assert order["steps"] >= 3 and order["history"] == 1
    [change] = await admin.delete_jobs(conn, [flows.order])
    assert change.done, change.message
    assert dict(await conn.fetchrow(remnants, flows.order)) == {
        "journal": 0,
        "steps": 0,
        "signals": 0,
        "dependencies": 0,
        "history": 0,
    }
    assert await venturi.get_job(conn, flows.order) is None
    # load: a Workflow node with two dependencies, completed; retention takes it with its
    # edges (its dependencies ended, so nothing unfinished reads it).
    load = dict(await conn.fetchrow(remnants, flows.load))
    assert load["dependencies"] == 2 and load["history"] == 1
    deleted = await admin.purge(conn, status="completed", older_than=0)
    assert dict(await conn.fetchrow(remnants, flows.load)) == {
        "journal": 0,
        "steps": 0,
        "signals": 0,
        "dependencies": 0,
        "history": 0,
    }
    # The unfinished workflows' finished jobs stay: the gatherer still reads its child.
    assert await venturi.get_job(conn, flows.gathered[0]) is not None
    assert deleted >= 1


async def test_a_database_from_before_the_history_moves_its_finished_jobs_in_batches(
    empty_dsn: str,
) -> None:
    # Migrations 1 to 16 as a database of the last release had them, 20,000 jobs seeded
    # as the benchmarks seed them (94% completed, 2% dead, 1% cancelled, the rest
    # pending or claimed) with their journal; then the upgrade (17 and every migration
    # after it) and the moves.
    conn = await asyncpg.connect(empty_dsn)
    try:
        for m in sql.migrations():
            if m.version > 16:
                break
            await conn.execute(m.sql)
            await conn.execute(sql.statement("schema_version_record"), m.version, m.name)
        await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 20_000, 3600.0)
        await conn.execute(sql.statement("maintenance/journal_seed_bulk"))
        digest = dict(await conn.fetchrow(tsql("jobs_digest_live"), None))
        later = [m.version for m in sql.migrations() if m.version > 16]
        assert await db.schema.apply_schema(conn, schema="venturi") == later
        before = await _where(conn)
        assert before["history"] == 0 and before["live_finished"] > 18_000

        batches = []
        while True:
            n = await db.operations.job_history_move(conn, schema="venturi", after=0, batch=1000)
            batches.append(n)
            if n < 1000:
                break
        assert all(n <= 1000 for n in batches) and len(batches) >= 19
        after = await _where(conn)
        assert after == {
            "live": before["live"],
            "live_finished": 0,
            "history": before["live_finished"],
        }
        assert dict(await conn.fetchrow(tsql("jobs_digest"), None)) == digest
    finally:
        await conn.close()


async def test_the_history_task_moves_as_the_worker_runs_and_its_knobs_are_checked(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("hist_live")
    ids = [await task.enqueue(conn, Item(i)) for i in range(20)]
    worker = Worker(None, dsn, [task], poll_max=0.1, maintenance=[History(interval=0.05)])
    async with running(worker):
        for job_id in ids:
            await wait_status(conn, job_id, "completed")
        await wait_stat(worker, "history_moved", len(ids))
    assert await _where(conn) == {"live": 0, "live_finished": 0, "history": len(ids)}
    assert [await venturi.get_result(conn, i) for i in ids] == [i * 2 for i in range(20)]
    for bad, message in (
        ({"batch": 0}, "history batch must be an integer >= 1, got 0"),
        ({"after": -1}, "history after must be non-negative, got -1"),
        ({"interval": 0}, "history interval must be positive, got 0"),
        ({"budget": "1"}, "history budget must be a timedelta or a number of seconds"),
    ):
        with pytest.raises(ConfigError) as err:
            History(**bad)
        assert str(err.value).startswith(message)
        assert "\n" not in str(err.value)


async def test_unique_for_counts_a_finished_holder_in_the_history(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="hist_unique", unique_for=3600)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    first = await handler.enqueue(conn, Item(1), key="K")
    await venturi.testing.drain(dsn, [handler])
    assert await _move_all(conn) == 1
    assert await handler.enqueue(conn, Item(2), key="K") == first
    [batch] = await venturi.enqueue_many(conn, [handler.job(Item(3), key="K")])
    assert batch == first
    with pytest.raises(venturi.DuplicateJob) as caught:
        await handler.enqueue(conn, Item(4), key="K", on_conflict="raise")
    assert caught.value.job_id == first
    assert await _where(conn) == {"live": 0, "live_finished": 0, "history": 1}
