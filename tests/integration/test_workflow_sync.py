"""Workflow primitives in sync (``def``) handlers (SPEC 12, amended), on a real database
with a real worker: each primitive is a blocking call that returns its value, with the
guarantees of the async form (a step runs once and replays, a sleep and a signal wait
give up the slot, children are spawned once and gathered, a Workflow node reads its
dependency's result, a transaction and a transactional step commit with the job); a
primitive called where it cannot work raises one line at the call."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
import venturi.testing
from tests.support import Item, running, wait_status
from venturi import Context, admin
from venturi.runtime.worker import Worker


class Approval(msgspec.Struct):
    by: str


async def test_a_sync_handler_runs_every_primitive_as_a_blocking_call(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    calls: Counter[str] = Counter()
    threads: set[str] = set()
    await conn.execute("CREATE TABLE sync_ledger (job bigint, what text)")

    def charge(total: int) -> int:
        calls["charge"] += 1
        return total * 100

    def reserve(tx: Any, job: int) -> str:  # a sync transactional step: a blocking conn
        tx.execute("INSERT INTO sync_ledger VALUES ($1, 'reserved')", job)
        return "reserved"

    @venturi.task(kind="wfs_child", result=int)
    def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n * 2)

    @venturi.task(kind="wfs_flow", result=int)
    def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        threads.add(threading.current_thread().name)
        cents = ctx.step("charge", charge, carry.n)
        assert isinstance(cents, int), cents  # a value, never a coroutine
        assert ctx.step_key("charge").startswith(f"venturi-{ctx.job.id}-")
        assert ctx.step("reserve", reserve, ctx.job.id, transactional=True) == "reserved"
        ctx.sleep("cool-off", timedelta(seconds=0))
        approval = ctx.wait_for_signal("approval", Approval, timeout=timedelta(days=1))
        kids = [ctx.spawn(f"kid-{i}", child, Item(i + 1)) for i in range(3)]
        doubled = ctx.gather(*kids)
        with ctx.transaction() as tx:
            tx.execute("INSERT INTO sync_ledger VALUES ($1, $2)", ctx.job.id, approval.by)
            ctx.complete(tx, cents + sum(doubled))
        return venturi.complete(-1)  # the transaction's completion stands

    job_id = await flow.enqueue(conn, Item(3))
    async with running(Worker(None, dsn, [flow, child], poll_max=600, concurrency=4)):
        await wait_status(conn, job_id, "waiting")  # for the signal
        assert await venturi.signal(conn, job_id, "approval", Approval("maria"))
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == 300 + 2 + 4 + 6
    assert calls["charge"] == 1  # replayed, not run again
    assert "MainThread" not in threads  # a sync handler runs in a thread
    rows = await conn.fetch("SELECT what FROM sync_ledger ORDER BY what")
    assert [r["what"] for r in rows] == ["maria", "reserved"]  # each once
    detail = await admin.show_job(conn, job_id)
    assert detail is not None and len(detail.children) == 3
    assert {s.name for s in detail.steps} >= {"charge", "reserve", "cool-off", "kid-0"}


async def test_a_sync_workflow_node_reads_its_dependency(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wfs_extract", result=int)
    def extract(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfs_load", result=int)
    def load(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(ctx.result_of("extract") + 1)

    wf = venturi.Workflow()
    a = wf.add("extract", extract.job(Item(41)))
    wf.add("load", load.job(Item(0)), after=[a])
    ids = await wf.enqueue(conn)
    await venturi.testing.drain(dsn, [extract, load])
    assert await venturi.get_result(conn, ids["load"]) == 42


async def test_a_sync_handler_enqueues_in_its_transaction(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # venturi's blocking calls take the connection of a sync handler's ctx.transaction()
    # (a BlockingConnection): the jobs commit with the handler's completion. It was taken
    # for an asynchronous connection ("await the async call"), which a handler with no
    # event loop cannot do.
    @venturi.task(kind="wfs_leaf")
    def leaf(ctx: Context[Any], carry: Item) -> None: ...

    @venturi.task(kind="wfs_fan")
    def fan(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        with ctx.transaction() as tx:
            leaf.enqueue_sync(tx, Item(1), group="acme")
            venturi.enqueue_many_sync(tx, [leaf.job(Item(2)), leaf.job(Item(3))])
            wf = venturi.Workflow()
            wf.add("four", leaf.job(Item(4)))
            wf.enqueue_sync(tx)
            return venturi.complete()

    parent = await fan.enqueue(conn, Item(0))
    await venturi.testing.drain(dsn, [fan, leaf])
    info = await venturi.get_job(conn, parent)
    assert info is not None and info.status == "completed"
    rows = await conn.fetch(
        "SELECT carry, grp, status FROM venturi.jobs WHERE kind = 'wfs_leaf' ORDER BY id"
    )
    assert [(r["grp"], r["status"]) for r in rows] == [("acme", "completed")] + [
        (None, "completed")
    ] * 3


async def test_a_primitive_where_it_cannot_work_raises_one_line_at_the_call(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    errors: list[str] = []

    @venturi.task(kind="wfs_misuse")
    def misuse(ctx: Context[Any], carry: Item) -> None:
        # Kept past the run's end, then called from a thread: nothing runs it any more.
        holder.append(ctx)

    holder: list[Context[Any]] = []
    await misuse.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [misuse])
    [ctx] = holder

    def enter() -> None:
        with ctx.transaction():
            pass

    def later() -> None:
        for call in (lambda: ctx.step("x", int), lambda: ctx.sleep("nap", 1), enter):
            try:
                call()
            except venturi.VenturiError as exc:
                errors.append(str(exc))

    await asyncio.to_thread(later)
    assert len(errors) == 3 and all("\n" not in e for e in errors)
    assert errors[0] == (
        f"job {ctx.job.id}: a workflow primitive was called after its run ended: call it "
        "while the handler runs (a thread the handler started must finish before it returns)"
    )
    assert errors[2].endswith(
        "ctx.transaction() was called after its run ended: call it "
        "while the handler runs (a thread the handler started must finish before it returns)"
    )
    # A context no worker made: the primitives' own one line, sync or async.
    plain: Context[Any] = Context(None, ctx.job)
    with pytest.raises(venturi.VenturiError, match=r"^ctx.step\(\) is a workflow primitive"):
        plain.step("x", int)


async def test_a_blocking_call_on_the_workers_loop_is_refused_not_a_deadlock(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    from venturi.blocking import BlockingConnection

    wrapped = BlockingConnection(conn, asyncio.get_running_loop())
    with pytest.raises(venturi.VenturiError, match="would wait for itself"):
        wrapped.fetchval("SELECT 1")
    assert await asyncio.to_thread(wrapped.fetchval, "SELECT 1") == 1


async def test_sync_handlers_filling_the_thread_pool_still_run_their_sync_steps(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """More sync handlers than the default thread pool has threads, each in a sync step:
    the steps run on threads of their own, so the handlers waiting for them never hold
    every thread a step would need."""
    import os
    import time

    pool_size = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor

    def slow(n: int) -> int:
        time.sleep(0.05)  # stays: a step that holds its thread is this test's point
        return n

    @venturi.task(kind="wfs_crowd", result=int)
    def crowd(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(ctx.step("slow", slow, carry.n))

    ids = [await crowd.enqueue(conn, Item(i)) for i in range(2 * pool_size)]
    async with running(Worker(None, dsn, [crowd], poll_max=600, concurrency=2 * pool_size)):
        for job_id in ids:
            await wait_status(conn, job_id, "completed", within=30)


async def test_sync_handlers_run_as_many_at_once_as_the_worker_has_slots(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """Sync handlers ran on asyncio's default executor: min(32, cores + 4) threads, 6 on
    two cores, so a worker of 12 slots ran 6 at once and the other 6 jobs waited,
    claimed and their leases running, for a thread. They run on the worker's own
    threads, one per slot."""
    import os

    slots = 2 * min(32, (os.cpu_count() or 1) + 4)  # twice asyncio's default executor
    started = 0
    lock = threading.Lock()
    all_in = threading.Event()

    @venturi.task(kind="wfs_slots")
    def hold(ctx: Context[Any], carry: Item) -> None:
        nonlocal started
        with lock:
            started += 1
            if started == slots:
                all_in.set()
        all_in.wait(20)  # every handler holds its thread until all have one

    await venturi.enqueue_many(conn, [hold.job(Item(i)) for i in range(slots)])
    async with running(Worker(None, dsn, [hold], poll_max=600, concurrency=slots)):
        assert await asyncio.to_thread(all_in.wait, 15), f"{started} of {slots} at once"


async def test_sync_handlers_that_ran_past_their_timeout_leave_threads_for_the_next(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """A sync handler that times out runs on in its thread (a thread cannot be stopped).
    With a thread per slot and none to spare, two such handlers on a worker of 2 slots
    held both threads, and the next two jobs timed out waiting for one, unrun."""
    ran: list[int] = []
    release = threading.Event()

    @venturi.task(kind="wfs_hung", timeout=0.3, max_failures=1)
    def hang(ctx: Context[Any], carry: Item) -> None:
        ran.append(carry.n)
        if carry.n < 2:
            release.wait(10)  # past its timeout: the run times out, the thread runs on

    hung = await venturi.enqueue_many(conn, [hang.job(Item(i)) for i in range(2)])
    try:
        async with running(Worker(None, dsn, [hang], poll_max=600, concurrency=2)):
            for job_id in hung:
                await wait_status(conn, job_id, "dead", within=10)  # timed out, threads held
            after = await venturi.enqueue_many(conn, [hang.job(Item(i)) for i in (2, 3)])
            for job_id in after:
                await wait_status(conn, job_id, "completed", within=10)
    finally:
        release.set()
    assert sorted(ran) == [0, 1, 2, 3]
