"""``venturi.Workflow`` (jobs after jobs, ``ctx.result_of``), the operators' side of
workflows (run-now, cancel cascades, retry keeping steps) and the sync drivers."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec
import psycopg
import pytest

import venturi
from tests.support import Item, running, wait_status
from venturi import Context, admin
from venturi.runtime.worker import Worker


class Rows(msgspec.Struct):
    n: int


async def test_a_workflow_runs_each_node_after_its_dependencies_with_their_results(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    order: list[str] = []

    @venturi.task(kind="wfg_extract", result=Rows)
    async def extract(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        order.append("extract")
        return venturi.complete(Rows(carry.n))

    @venturi.task(kind="wfg_transform", result=Rows)
    async def transform(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        order.append("transform")
        got: Rows = await ctx.result_of("extract")
        return venturi.complete(Rows(got.n * 2))

    @venturi.task(kind="wfg_load")
    async def load(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        order.append("load")
        a, b = await ctx.result_of("extract"), await ctx.result_of("transform")
        assert isinstance(a, Rows) and isinstance(b, Rows)
        return venturi.complete(a.n + b.n)

    wf = venturi.Workflow()
    a = wf.add("extract", extract.job(Item(3)))
    b = wf.add("transform", transform.job(Item(0)), after=[a])
    wf.add("load", load.job(Item(0)), after=[a, b])
    async with conn.transaction():
        ids = await wf.enqueue(conn)
    statuses = {
        r["id"]: r["status"]
        for r in await conn.fetch(
            "SELECT id, status FROM venturi.jobs WHERE id = ANY($1)", list(ids.values())
        )
    }
    assert statuses == {
        ids["extract"]: "pending",
        ids["transform"]: "waiting",
        ids["load"]: "waiting",
    }
    async with running(Worker(None, dsn, [extract, transform, load], poll_max=600, concurrency=3)):
        await wait_status(conn, ids["load"], "completed")
    assert order == ["extract", "transform", "load"]
    assert await venturi.get_result(conn, ids["load"]) == 9


async def test_a_dead_dependency_cancels_its_dependents_transitively(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfg_fail", max_failures=1)
    async def fail(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.dead("broken source")

    @venturi.task(kind="wfg_never")
    async def never(ctx: Context[Any], carry: Item) -> None:
        raise AssertionError("must not run")

    wf = venturi.Workflow()
    a = wf.add("a", fail.job(Item(1)))
    wf.add("b", never.job(Item(2)), after=[a])
    wf.add("c", never.job(Item(3)), after=["b"])
    ids = await wf.enqueue(conn)
    async with running(Worker(None, dsn, [fail, never], poll_max=600)):
        await wait_status(conn, ids["c"], "cancelled")
    assert await _status(conn, ids["b"]) == "cancelled"
    journal_b = await venturi.get_journal(conn, ids["b"])
    assert [e.detail for e in journal_b if e.event == "cancelled"] == [
        f"dependency job {ids['a']} ended dead"
    ]
    journal_c = await venturi.get_journal(conn, ids["c"])
    assert [e.detail for e in journal_c if e.event == "cancelled"] == [
        f"dependency job {ids['b']} ended cancelled"
    ]


async def _status(conn: asyncpg.Connection, job_id: int) -> str:
    return str(await conn.fetchval("SELECT status FROM venturi.jobs WHERE id = $1", job_id))


async def test_a_cycle_or_an_unknown_node_is_a_config_error_before_any_write(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfg_node")
    async def node(ctx: Context[Any], carry: Item) -> None: ...

    other = venturi.Workflow()
    stranger = other.add("x", node.job(Item(1)))
    wf = venturi.Workflow()
    with pytest.raises(venturi.ConfigError, match="not a node of this workflow"):
        wf.add("a", node.job(Item(1)), after=[stranger])
    with pytest.raises(venturi.ConfigError, match="not a node of this workflow"):
        wf.add("a", node.job(Item(1)), after=["missing"])
    a = wf.add("a", node.job(Item(1)))
    b = wf.add("b", node.job(Item(2)), after=[a])
    a.after = (b,)  # a cycle can only be made by hand; still refused
    with pytest.raises(venturi.ConfigError, match="cycle"):
        await wf.enqueue(conn)
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 0


async def test_run_now_wakes_a_sleeping_workflow_and_its_replayed_sleep_returns(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfg_sleeper")
    async def sleeper(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.sleep("long", timedelta(days=1))
        return venturi.complete("woke")

    job_id = await sleeper.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [sleeper], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        [change] = await admin.run_now_jobs(conn, [job_id], operator="op")
        assert change.done, change.message
        await wait_status(conn, job_id, "completed")
    woken = [e for e in await venturi.get_journal(conn, job_id) if e.event == "woken"]
    assert [e.worker for e in woken] == ["op"]


async def test_cancelling_a_parent_cancels_its_unfinished_children(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="wfg_slow_child")
    async def slow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        started.set()
        await ctx.cancelled()  # runs until asked to stop, then stops short of completing
        return venturi.pause(carry)

    @venturi.task(kind="wfg_idle_child")
    async def idle(ctx: Context[Any], carry: Item) -> None:
        raise AssertionError("must not run")

    @venturi.task(kind="wfg_cparent")
    async def parent(ctx: Context[Any], carry: Item) -> None:
        a = await ctx.spawn("running", slow, Item(1))
        b = await ctx.spawn("queued", idle, Item(2))
        await ctx.gather(a, b)

    job_id = await parent.enqueue(conn, Item(1))
    # idle is not registered: its child stays pending.
    worker = Worker(None, dsn, [parent, slow], poll_max=600, concurrency=2, heartbeat=0.1)
    async with running(worker):
        await wait_status(conn, job_id, "waiting")
        await asyncio.wait_for(started.wait(), 15)
        [change] = await admin.cancel_jobs(conn, [job_id], operator="op")
        assert change.done, change.message
        kids = await conn.fetch(
            "SELECT id, kind, status, cancel_requested_at IS NOT NULL AS asked "
            "FROM venturi.jobs WHERE parent_id = $1 ORDER BY id",
            job_id,
        )
        by_kind = {r["kind"]: r for r in kids}
        assert by_kind["wfg_idle_child"]["status"] == "cancelled"
        assert by_kind["wfg_slow_child"]["asked"]  # claimed: its worker settles it
        await wait_status(conn, by_kind["wfg_slow_child"]["id"], "cancelled")
    assert await _status(conn, job_id) == "cancelled"
    journal = await venturi.get_journal(conn, by_kind["wfg_idle_child"]["id"])
    assert [e.detail for e in journal if e.event == "cancelled"] == [
        f"its parent job {job_id} was cancelled"
    ]


async def test_retrying_a_dead_workflow_keeps_its_steps(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    calls: Counter[str] = Counter()
    broken = {"yes": True}

    def pay() -> str:
        calls["pay"] += 1
        return "paid"

    @venturi.task(kind="wfg_retry", max_failures=1)
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("pay", pay)
        if broken["yes"]:
            raise RuntimeError("shipping down")
        return venturi.complete("shipped")

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=600)):
        await wait_status(conn, job_id, "dead")
        broken["yes"] = False
        [change] = await admin.retry_jobs(conn, [job_id], operator="op")
        assert change.done, change.message
        await wait_status(conn, job_id, "completed")
    assert calls["pay"] == 1


async def test_signal_and_workflow_on_a_sync_driver(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfg_sync_node")
    async def node(ctx: Context[Any], carry: Item) -> None: ...

    wf = venturi.Workflow()
    a = wf.add("a", node.job(Item(1)))
    wf.add("b", node.job(Item(2)), after=[a])
    with psycopg.connect(dsn) as pg:
        ids = wf.enqueue_sync(pg)
        with pytest.raises(TypeError):
            venturi.signal_sync(pg, ids["a"], "go", {1, 2, 3}.__iter__())
        assert venturi.signal_sync(pg, ids["b"], "go", {"x": 1})
        assert not venturi.signal_sync(pg, ids["b"], "go", {"x": 2})
    assert await _status(conn, ids["b"]) == "waiting"
    payload = await conn.fetchval(
        "SELECT payload::text FROM venturi.signals WHERE job_id = $1", ids["b"]
    )
    assert payload == '{"x": 1}'


async def test_a_waiting_workflow_holds_its_key_and_venturi_wait_sees_it_finish(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfg_keyed")
    async def keyed(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        who = await ctx.wait_for_signal("go", str)
        return venturi.complete(who)

    job_id = await keyed.enqueue(conn, Item(1), key="order-7")
    async with running(Worker(None, dsn, [keyed], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        # Unfinished while it waits: the key is still held.
        assert await keyed.enqueue(conn, Item(2), key="order-7") == job_id
        with pytest.raises(venturi.DuplicateJob):
            await keyed.enqueue(conn, Item(2), key="order-7", on_conflict="raise")
        other = await asyncpg.connect(dsn)
        try:
            waiter = asyncio.ensure_future(venturi.wait(other, job_id, timeout=30))
            assert await venturi.signal(conn, job_id, "go", "ann")
            done = await waiter
        finally:
            await other.close()
    assert done.status == "completed" and done.result == "ann"
