"""The operators' view of workflows (SPEC 12, status and operations): ``jobs show`` lists
a job's steps, signals, children, dependencies and what it waits for; every health read
counts waiting jobs; retention keeps a finished job an unfinished workflow still reads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import pytest

import venturi
import venturi.testing
from tests.support import Item, running, wait_status
from venturi import Context, admin, db
from venturi.maintenance import gauges
from venturi.runtime.worker import Worker


def _family() -> tuple[venturi.Task[Any], venturi.Task[Any], venturi.Task[Any]]:
    """A parent that records a step, spawns a quick child and one that waits for the
    signal ``approval``, and gathers both."""

    @venturi.task(kind="wfo_quick", result=int)
    async def quick(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfo_approve", result=str)
    async def approve(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.wait_for_signal("approval", str))

    async def price(n: int) -> int:
        return n * 100

    @venturi.task(kind="wfo_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("price", price, carry.n)
        kids = [await ctx.spawn("quick", quick, Item(1)), await ctx.spawn("slow", approve, Item(2))]
        got = await ctx.gather(*kids)
        return venturi.complete(got)

    return parent, quick, approve


async def _ids(conn: asyncpg.Connection, parent_id: int) -> tuple[int, int]:
    rows = await conn.fetch(
        "SELECT id, kind FROM venturi.jobs WHERE parent_id = $1 ORDER BY id", parent_id
    )
    by_kind = {r["kind"]: r["id"] for r in rows}
    return by_kind["wfo_quick"], by_kind["wfo_approve"]


async def test_show_lists_steps_signals_children_and_what_a_job_waits_for(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, quick, approve = _family()
    job_id = await parent.enqueue(conn, Item(3))
    plain = await quick.enqueue(conn, Item(9))
    await venturi.testing.drain(dsn, [parent, quick, approve])
    quick_id, slow_id = await _ids(conn, job_id)

    shown = await admin.show_job(conn, job_id)
    assert shown is not None and shown.job.status == "waiting"
    assert shown.parent_id is None
    assert "price" in [s.name for s in shown.steps]
    assert [(c.id, c.kind, c.status) for c in shown.children] == [
        (quick_id, "wfo_quick", "completed"),
        (slow_id, "wfo_approve", "waiting"),
    ]
    assert shown.signals == [] and shown.dependencies == []
    w = shown.waiting_for
    assert w is not None
    assert (w.children, w.dependencies, w.jobs, w.signal, w.wake_at) == (
        1,
        0,
        [slow_id],
        None,
        None,
    )

    child = await admin.show_job(conn, slow_id)
    assert child is not None and child.parent_id == job_id
    assert child.waiting_for is not None and child.waiting_for.signal == "approval"
    assert child.waiting_for.jobs == [] and child.waiting_for.wake_at is None

    # A plain job: no workflow side at all.
    alone = await admin.show_job(conn, plain)
    assert alone is not None and alone.job.status == "completed"
    assert (alone.parent_id, alone.steps, alone.children, alone.waiting_for) == (
        None,
        [],
        [],
        None,
    )

    assert await venturi.signal(conn, slow_id, "approval", "ann")
    await venturi.testing.drain(dsn, [parent, quick, approve])
    child = await admin.show_job(conn, slow_id)
    assert child is not None and child.job.status == "completed"
    assert [s.name for s in child.signals] == ["approval"]
    assert child.waiting_for is None
    done = await admin.show_job(conn, job_id)
    assert done is not None and done.job.status == "completed" and done.waiting_for is None
    assert {c.status for c in done.children} == {"completed"}


async def test_show_lists_dependencies_and_a_waiting_nodes_count(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    _, _, approve = _family()

    @venturi.task(kind="wfo_after")
    async def after(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.result_of("gate"))

    wf = venturi.Workflow()
    gate = wf.add("gate", approve.job(Item(1)))
    wf.add("after", after.job(Item(0)), after=[gate])
    async with conn.transaction():
        ids = await wf.enqueue(conn)
    shown = await admin.show_job(conn, ids["after"])
    assert shown is not None and shown.job.status == "waiting"
    assert [(d.name, d.id, d.kind, d.status) for d in shown.dependencies] == [
        ("gate", ids["gate"], "wfo_approve", "pending")
    ]
    w = shown.waiting_for
    assert w is not None and (w.dependencies, w.children, w.jobs) == (1, 0, [ids["gate"]])


async def test_show_gives_a_timers_time_and_a_signals_timeout(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfo_nap")
    async def nap(ctx: Context[Any], carry: Item) -> None:
        if carry.n:
            await ctx.wait_for_signal("go", str, timeout=timedelta(hours=1))
        else:
            await ctx.sleep("nap", timedelta(hours=1))

    sleeper, asker = await nap.enqueue(conn, Item(0)), await nap.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [nap], poll_max=600)):
        await wait_status(conn, sleeper, "waiting")
        await wait_status(conn, asker, "waiting")
    now = await conn.fetchval("SELECT now()")
    s = await admin.show_job(conn, sleeper)
    assert s is not None and s.waiting_for is not None
    assert s.waiting_for.signal is None and s.waiting_for.wake_at is not None
    assert s.waiting_for.wake_at > now + timedelta(minutes=59)
    assert [st.name for st in s.steps] == ["nap"]
    a = await admin.show_job(conn, asker)
    assert a is not None and a.waiting_for is not None
    assert a.waiting_for.signal == "go" and a.waiting_for.wake_at is not None


async def test_every_health_read_counts_waiting_jobs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, quick, approve = _family()
    await parent.enqueue(conn, Item(3))
    await venturi.testing.drain(dsn, [parent, quick, approve])

    def waiting(rows: list[admin.KindHealth]) -> dict[str, int]:
        return {k.kind: k.waiting for k in rows}

    expected = {"wfo_approve": 1, "wfo_parent": 1, "wfo_quick": 0}
    assert waiting((await admin.stats(conn)).kinds) == expected
    top = (await admin.top_frame(conn)).kinds
    assert {k: v for k, v in waiting(top).items() if v} == {"wfo_approve": 1, "wfo_parent": 1}
    assert waiting((await admin.overview(conn)).kinds) == expected
    for k in (await admin.stats(conn)).kinds:
        # Waiting jobs are neither due nor scheduled: they hold no place in the claim.
        assert (k.due, k.scheduled, k.claimed) == (0, 0, 0)

    rows = await db.workers.queue_gauges(conn, schema="venturi", liveness=30.0)
    snap = gauges.Snapshot(list(rows), 0.0)
    assert {k.kind: k.waiting for k in snap.kinds if k.waiting} == {
        "wfo_approve": 1,
        "wfo_parent": 1,
    }
    pytest.importorskip("prometheus_client")
    collector = gauges.QueueCollector()
    collector.snapshot, collector.up = snap, True
    [jobs] = [m for m in collector.collect() if m.name == "venturi_queue_jobs"]
    samples = {(s.labels["kind"], s.labels["status"]): s.value for s in jobs.samples}
    assert samples[("wfo_approve", "waiting")] == 1.0
    assert (samples[("wfo_parent", "waiting")], samples[("wfo_parent", "due")]) == (1.0, 0.0)


async def test_retention_keeps_a_finished_child_until_its_parent_ends(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, quick, approve = _family()
    job_id = await parent.enqueue(conn, Item(3))
    plain = await quick.enqueue(conn, Item(9))
    await venturi.testing.drain(dsn, [parent, quick, approve])
    quick_id, slow_id = await _ids(conn, job_id)

    # The parent's gather still needs the quick child's result: only the plain job goes.
    assert await admin.purge_count(conn, status="completed", older_than=0) == 1
    assert await admin.purge(conn, status="completed", older_than=0) == 1
    assert await venturi.get_job(conn, plain) is None
    assert await venturi.get_job(conn, quick_id) is not None

    assert await venturi.signal(conn, slow_id, "approval", "ann")
    await venturi.testing.drain(dsn, [parent, quick, approve])
    assert await venturi.get_result(conn, job_id) == [1, "ann"]
    # Parent ended: the whole family goes, with its steps and signals.
    assert await admin.purge_count(conn, status="completed", older_than=0) == 3
    assert await admin.purge(conn, status="completed", older_than=0) == 3
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 0
    assert await conn.fetchval("SELECT count(*) FROM venturi.steps") == 0
    assert await conn.fetchval("SELECT count(*) FROM venturi.signals") == 0


async def test_retention_keeps_a_dependency_its_pending_or_cancelled_dependent_reads(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfo_first", result=int)
    async def first(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfo_second", result=int)
    async def second(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        got: int = await ctx.result_of("first")
        return venturi.complete(got + 1)

    wf = venturi.Workflow()
    a = wf.add("first", first.job(Item(41)))
    wf.add("second", second.job(Item(0)), after=[a])
    async with conn.transaction():
        ids = await wf.enqueue(conn)
    # Only the first node runs: the second is pending then, and reads its result later.
    await venturi.testing.drain(dsn, [first])
    assert await venturi.get_job(conn, ids["second"]) is not None
    assert (await venturi.get_job(conn, ids["first"])).status == "completed"  # type: ignore[union-attr]
    assert await admin.purge(conn, status="completed", older_than=0) == 0
    # A cancelled dependent may be retried and read its dependency's result then.
    [change] = await admin.cancel_jobs(conn, [ids["second"]])
    assert change.done
    assert await admin.purge_count(conn, status="completed", older_than=0) == 0
    assert await admin.purge(conn, status="completed", older_than=0) == 0
    [change] = await admin.retry_jobs(conn, [ids["second"]])
    assert change.done
    await venturi.testing.drain(dsn, [second])
    assert await venturi.get_result(conn, ids["second"]) == 42
    assert await admin.purge(conn, status="completed", older_than=0) == 2
