"""Workflows (SPEC 12) on a real worker and PostgreSQL: each primitive of ``Context``,
``venturi.signal`` and the waiting status."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import Item, running, wait_for, wait_status
from venturi import Context
from venturi.context import JobMeta
from venturi.runtime.completer import error_of
from venturi.runtime.worker import Worker


class Charge(msgspec.Struct):
    amount: int
    ref: str


async def _events(conn: asyncpg.Connection, job_id: int) -> list[str]:
    return [e.event for e in await venturi.get_journal(conn, job_id)]


async def test_a_step_runs_once_and_replays_its_value_after_a_wait(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    calls: Counter[str] = Counter()

    async def charge(amount: int) -> Charge:
        calls["charge"] += 1
        return Charge(amount, f"ref-{amount}")

    seen: list[Charge] = []

    @venturi.task(kind="wf_step")
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        c = await ctx.step("charge", charge, carry.n)
        seen.append(c)
        # stays: a durable timer that really comes due makes the second run
        await ctx.sleep("cool-off", timedelta(milliseconds=300))
        return venturi.complete({"ref": c.ref})

    job_id = await flow.enqueue(conn, Item(5))
    async with running(Worker(None, dsn, [flow], poll_max=5)):
        await wait_status(conn, job_id, "waiting")
        await wait_status(conn, job_id, "completed")
    assert calls["charge"] == 1
    # Both runs got the recorded value, decoded as the function's return annotation.
    assert seen == [Charge(5, "ref-5"), Charge(5, "ref-5")]
    assert await venturi.get_result(conn, job_id) == {"ref": "ref-5"}
    events = await _events(conn, job_id)
    assert events.count("waiting") == 1 and events.count("woken") == 1
    steps = await conn.fetch("SELECT name, value FROM venturi.steps WHERE job_id = $1", job_id)
    assert {r["name"] for r in steps} == {"charge", "cool-off"}


async def test_a_transactional_steps_writes_commit_with_its_record(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    await conn.execute("CREATE TABLE reserved (job_id bigint, sku text)")

    async def reserve(tx: asyncpg.Connection, job_id: int, sku: str) -> int:
        await tx.execute("INSERT INTO reserved VALUES ($1, $2)", job_id, sku)
        return 1

    @venturi.task(kind="wf_tx")
    async def flow(ctx: Context[Any], carry: Item) -> None:
        await ctx.step("reserve", reserve, ctx.job.id, "sku-1", transactional=True)
        # stays: a durable timer that really comes due: the step must not run again
        await ctx.sleep("nap", timedelta(milliseconds=200))

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=5)):
        await wait_status(conn, job_id, "completed")
    assert await conn.fetchval("SELECT count(*) FROM reserved") == 1


async def test_a_step_name_used_twice_is_a_config_error(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_twice", max_failures=1)
    async def flow(ctx: Context[Any], carry: Item) -> None:
        await ctx.step("same", lambda: 1)
        await ctx.step("same", lambda: 2)

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=5)):
        await wait_status(conn, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and "ConfigError" in (job.last_error or "")
    assert "used twice" in (job.last_error or "")


async def test_primitives_need_a_worker_made_context_and_their_workers_loop(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    plain: Context[Any] = Context(None, JobMeta(1, "k", venturi.Priority.NORMAL, 1, 0, None))  # type: ignore[arg-type]
    with pytest.raises(venturi.VenturiError, match="needs a context made by a worker"):
        await plain.step("x", lambda: 1)
    with pytest.raises(venturi.VenturiError, match="needs a context made by a worker"):
        await plain.sleep("x", 1)

    # A sync handler's primitives run on its worker's loop (test_workflow_sync.py), and
    # so do those awaited on an event loop of the handler's own (asyncio.run, asgiref's
    # async_to_sync): its connection, though, cannot be lent there: one line.
    @venturi.task(kind="wf_sync", max_failures=1)
    def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        import asyncio

        async def elsewhere() -> Any:
            try:
                ctx.transaction()
            except venturi.VenturiError as exc:
                refused.append(str(exc))
            return await ctx.step("x", lambda: 1)

        return venturi.complete(asyncio.run(elsewhere()))

    refused: list[str] = []
    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=5)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == 1
    assert refused == [
        "ctx.transaction() was called on an event loop other than its worker's, where its "
        "connection cannot be used: call it from the handler itself"
    ]


async def test_a_signal_wakes_its_waiter_and_the_first_of_a_name_wins(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    class Approval(msgspec.Struct):
        by: str

    @venturi.task(kind="wf_signal")
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        ok = await ctx.wait_for_signal("approval", Approval)
        return venturi.complete(ok.by)

    job_id = await flow.enqueue(conn, Item(1))
    with pytest.raises(TypeError, match="payload"):
        await venturi.signal(conn, job_id, "approval", object())
    assert await conn.fetchval("SELECT count(*) FROM venturi.signals") == 0
    # poll_max far away: the wake-up must come by notification.
    async with running(Worker(None, dsn, [flow], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == venturi.status.JobStatus.WAITING
        assert await venturi.signal(conn, job_id, "approval", Approval("ann"))
        assert not await venturi.signal(conn, job_id, "approval", Approval("bob"))
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == "ann"
    assert not await venturi.signal(conn, job_id, "other", 1)  # finished
    assert not await venturi.signal(conn, 10**9, "other", 1)  # missing
    journal = await venturi.get_journal(conn, job_id)
    woken = [e for e in journal if e.event == "woken"]
    assert [e.detail for e in woken] == ["signal approval"]
    waiting = [e for e in journal if e.event == "waiting"]
    assert waiting and "signal 'approval'" in (waiting[0].detail or "")


async def test_a_signal_timeout_raises_on_this_and_every_later_run(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    outcomes: list[str] = []

    @venturi.task(kind="wf_timeout")
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        try:
            got = await ctx.wait_for_signal("approval", str, timeout=timedelta(milliseconds=300))
            outcomes.append(got)
        except venturi.SignalTimeout as exc:
            assert isinstance(exc, TimeoutError)
            outcomes.append("timeout")
        # stays: a durable timer that really comes due makes the later run
        await ctx.sleep("after", timedelta(milliseconds=200))
        return venturi.complete(outcomes[-1])

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=600)):
        await wait_for(lambda: _has_step(conn, job_id, "after"))
        # Sent after the timeout: recorded, but the workflow already timed out.
        await venturi.signal(conn, job_id, "approval", "late")
        await wait_status(conn, job_id, "completed")
    assert outcomes[-2:] == ["timeout", "timeout"]
    assert await venturi.get_result(conn, job_id) == "timeout"


async def _has_step(conn: asyncpg.Connection, job_id: int, name: str) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT count(*) FROM venturi.steps WHERE job_id = $1 AND name = $2", job_id, name
        )
    )


async def test_children_are_spawned_once_and_gathered_as_their_result_type(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    class Parcel(msgspec.Struct):
        n: int

    @venturi.task(kind="wf_ship", result=Parcel)
    async def ship(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(Parcel(carry.n * 10))

    runs: Counter[str] = Counter()

    @venturi.task(kind="wf_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        runs["parent"] += 1
        kids = [await ctx.spawn(f"ship-{i}", ship, Item(i)) for i in range(3)]
        got = await ctx.gather(*kids)
        assert all(isinstance(p, Parcel) for p in got)
        return venturi.complete([p.n for p in got])

    job_id = await parent.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [parent, ship], poll_max=600, concurrency=2)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == [0, 10, 20]
    children = await conn.fetch(
        "SELECT id, status FROM venturi.jobs WHERE parent_id = $1 ORDER BY id", job_id
    )
    assert [r["status"] for r in children] == ["completed"] * 3
    # However many runs the parent took, each child was spawned once.
    assert runs["parent"] >= 1
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 4


async def test_a_dead_child_raises_child_failed_which_the_parent_may_catch(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_bad_child", max_failures=1)
    async def bad(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.dead("out of stock")

    @venturi.task(kind="wf_parent2")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kid = await ctx.spawn("bad", bad, Item(1))
        try:
            await ctx.gather(kid)
        except venturi.ChildFailed as exc:
            return venturi.complete([exc.job_id == kid.job_id, exc.status, exc.reason])
        return venturi.complete("no")

    job_id = await parent.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [parent, bad], poll_max=600, concurrency=2)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == [True, "dead", "out of stock"]


async def test_a_parent_failed_by_its_child_reports_child_failed_not_the_childs_error(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # ChildFailed's message carried the child's whole traceback, whose last line, the
    # child's exception, then ended the parent's: its failure line, error type and the
    # jobs list blamed the parent for an error it never raised.
    @venturi.task(kind="wf_card", max_failures=1)
    async def card(ctx: Context[Any], carry: Item) -> None:
        raise RuntimeError("card declined")

    @venturi.task(kind="wf_order", max_failures=1)
    async def order(ctx: Context[Any], carry: Item) -> None:
        await ctx.gather(await ctx.spawn("card", card, Item(1)))

    job_id = await order.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [order, card], poll_max=600, concurrency=2)):
        await wait_status(conn, job_id, "dead")
    info = await venturi.get_job(conn, job_id)
    assert info is not None and info.last_error is not None
    kind, message = error_of(info.last_error)
    assert kind.endswith("ChildFailed"), (kind, message)
    assert message.endswith("ended dead: RuntimeError: card declined"), message


async def test_a_recorded_value_that_no_longer_decodes_settles_dead_naming_step_and_type(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    async def amount() -> int:
        return 1

    @venturi.task(kind="wf_decode")
    async def flow(ctx: Context[Any], carry: Item) -> None:
        await ctx.step("amount", amount)

    job_id = await flow.enqueue(conn, Item(1))
    # A value recorded by an older version of the code, as text.
    await conn.execute(
        "INSERT INTO venturi.steps (job_id, name, value) VALUES ($1, 'amount', '\"ten\"')", job_id
    )
    async with running(Worker(None, dsn, [flow], poll_max=5)):
        await wait_status(conn, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None
    assert "step 'amount'" in (job.last_error or "") and "int" in (job.last_error or "")
    assert (await _events(conn, job_id)).count("failed") == 0  # no retry loop


async def test_a_workflow_that_gained_a_step_between_runs_replays_the_old_and_runs_the_new(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    calls: Counter[str] = Counter()

    def count(name: str) -> str:
        calls[name] += 1
        return name

    version = {"v": 1}

    @venturi.task(kind="wf_evolve")
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        a = await ctx.step("a", count, "a")
        if version["v"] == 2:
            await ctx.step("inserted", count, "inserted")
        await ctx.wait_for_signal("go", int)
        b = await ctx.step("b", count, "b")
        return venturi.complete([a, b])

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=600)):
        await wait_status(conn, job_id, "waiting")
        version["v"] = 2  # a deploy adds a step before the wait
        await venturi.signal(conn, job_id, "go", 1)
        await wait_status(conn, job_id, "completed")
    assert calls == Counter({"a": 1, "inserted": 1, "b": 1})
    assert await venturi.get_result(conn, job_id) == ["a", "b"]
