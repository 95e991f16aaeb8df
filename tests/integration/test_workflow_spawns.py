"""Spawns written together: a run's unkeyed ``ctx.spawn`` calls take ids drawn ahead
and are written in one statement before the run's next statement or when the handler
returns. Each child is still written with its record in one statement, so a run that
ends before the write leaves neither, and the next run spawns them once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_for, wait_status
from venturi import Context, db
from venturi.runtime.worker import Worker
from venturi.workflow.children import SPARE_IDS

S = "venturi"


async def _children(conn: asyncpg.Connection, parent: int) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await conn.fetch(
        "SELECT j.id, j.status, s.name FROM venturi.jobs j "
        "LEFT JOIN venturi.steps s ON s.job_id = $1 AND (s.value #>> '{}')::bigint = j.id "
        "WHERE j.parent_id = $1 ORDER BY j.id",
        parent,
    )
    return rows


async def test_spawns_a_failed_run_left_unwritten_are_spawned_once_by_the_next(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid", result=int)
    async def kid(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    runs: Counter[str] = Counter()
    seen_ids: list[list[int]] = []

    @venturi.task(kind="wf_fan", max_failures=3)
    async def fan(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        runs["fan"] += 1
        kids = [await ctx.spawn(f"k{i}", kid, Item(i)) for i in range(5)]
        seen_ids.append([k.job_id for k in kids])
        if runs["fan"] == 1:
            # Nothing suspended since the spawns: their write is still queued, and the
            # run's end cancels it.
            raise RuntimeError("the run fails right after its spawns")
        return venturi.complete(sum(await ctx.gather(*kids)))

    job_id = await fan.enqueue(conn, Item(0))
    async with running(Worker(None, dsn, [fan, kid], poll_max=5, concurrency=4)):
        await wait_status(conn, job_id, "completed")
    assert runs["fan"] >= 2  # the failed run, the one that spawned, its replay after
    children = await _children(conn, job_id)
    assert sorted(r["name"] for r in children) == [f"k{i}" for i in range(5)]
    assert [r["status"] for r in children] == ["completed"] * 5
    assert await venturi.get_result(conn, job_id) == sum(range(5))
    # The second run spawned them, with ids of its own (the first run's are gaps), and
    # its replays saw the same.
    assert seen_ids[1] == [r["id"] for r in sorted(children, key=lambda r: r["name"])]
    assert all(ids == seen_ids[1] for ids in seen_ids[2:])
    assert not set(seen_ids[0]) & set(seen_ids[1])
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 6


async def test_children_run_while_their_parent_goes_on_before_its_next_primitive(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid4")
    async def kid(ctx: Context[Any], carry: Item) -> None:
        return None

    go_on = asyncio.Event()

    @venturi.task(kind="wf_slow_parent")
    async def parent(ctx: Context[Any], carry: Item) -> None:
        kids = [await ctx.spawn(f"k{i}", kid, Item(i)) for i in range(3)]
        await go_on.wait()  # work of its own, no primitive: the spawns are written now
        await ctx.gather(*kids)

    job_id = await parent.enqueue(conn, Item(0))
    async with running(Worker(None, dsn, [parent, kid], poll_max=5, concurrency=4)):

        async def kids_done() -> bool:
            n = await conn.fetchval(
                "SELECT count(*) FROM venturi.jobs WHERE parent_id = $1 AND status = 'completed'",
                job_id,
            )
            return bool(n == 3)

        await wait_for(kids_done)
        assert await conn.fetchval("SELECT status FROM venturi.jobs WHERE id = $1", job_id) == (
            "claimed"
        )
        go_on.set()
        await wait_status(conn, job_id, "completed")


async def test_a_spawn_write_rolled_back_leaves_neither_child_nor_record(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid5")
    async def kid(ctx: Context[Any], carry: Item) -> None:
        return None

    parent = await kid.enqueue(conn, Item(0))
    ids = await db.workflow.job_ids_draw(conn, schema=S, count=2)
    args: dict[str, Any] = {
        "schema": S,
        "parent_id": parent,
        "names": ["a", "b"],
        "specs": [kid.job(Item(1)), kid.job(Item(2))],
        "traceparents": [None, None],
    }
    tx = conn.transaction()
    await tx.start()
    await db.workflow.child_spawn_many(conn, ids=ids, **args)
    await tx.rollback()  # the process died before the commit
    assert await _children(conn, parent) == []
    assert await conn.fetchval("SELECT count(*) FROM venturi.steps WHERE job_id = $1", parent) == 0
    again = await db.workflow.job_ids_draw(conn, schema=S, count=2)
    assert await db.workflow.child_spawn_many(conn, ids=again, **args) == {
        "a": (again[0], True),
        "b": (again[1], True),
    }
    assert [r["id"] for r in await _children(conn, parent)] == again


async def test_spawns_a_handler_returns_after_are_written_before_its_completion(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid2")
    async def kid(ctx: Context[Any], carry: Item) -> None:
        return None

    @venturi.task(kind="wf_fire")
    async def fire(ctx: Context[Any], carry: Item) -> None:
        # Fire and forget: no gather, nothing else after the spawns.
        for i in range(carry.n):
            await ctx.spawn(f"k{i}", kid, Item(i))

    # More spawns than one draw of ids covers: the run draws again.
    n = SPARE_IDS + 5
    job_id = await fire.enqueue(conn, Item(n))
    async with running(Worker(None, dsn, [fire, kid], poll_max=5, concurrency=4)):
        await wait_status(conn, job_id, "completed")
        children = await _children(conn, job_id)
        assert sorted(r["name"] for r in children) == sorted(f"k{i}" for i in range(n))
        for child in children:
            await wait_status(conn, child["id"], "completed")


async def test_a_spawn_written_after_another_run_recorded_its_name_keeps_that_runs_child(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid3")
    async def kid(ctx: Context[Any], carry: Item) -> None:
        return None

    parent = await kid.enqueue(conn, Item(0))
    first = await db.workflow.child_spawn(
        conn, schema=S, parent_id=parent, name="a", spec=kid.job(Item(1)), traceparent=None
    )
    spare = await db.workflow.job_ids_draw(conn, schema=S, count=3)
    assert len(spare) == 3 and spare == sorted(spare) and first["id"] < spare[0]
    # Another run of the parent recorded "b" first (this run lost its claim meanwhile).
    other = await db.workflow.child_spawn(
        conn, schema=S, parent_id=parent, name="b", spec=kid.job(Item(2)), traceparent=None
    )
    written = await db.workflow.child_spawn_many(
        conn,
        schema=S,
        parent_id=parent,
        names=["b", "c"],
        ids=spare[:2],
        specs=[kid.job(Item(2)), kid.job(Item(3))],
        traceparents=[None, None],
    )
    assert written == {"b": (int(other["id"]), False), "c": (spare[1], True)}
    ids = [r["id"] for r in await _children(conn, parent)]
    # a, b (the other run's), c: the drawn id the other run's record beat is unused.
    assert ids == sorted([first["id"], other["id"], spare[1]])
    assert spare[0] not in ids
    # Written again (a retry of the same write): nothing changes.
    again = await db.workflow.child_spawn_many(
        conn,
        schema=S,
        parent_id=parent,
        names=["c"],
        ids=[spare[2]],
        specs=[kid.job(Item(3))],
        traceparents=[None],
    )
    assert again == {"c": (spare[1], False)}
    assert len(await _children(conn, parent)) == 3


@pytest.mark.parametrize("n", [1, 10])
async def test_a_fan_out_gathers_every_child_it_spawned(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], n: int
) -> None:
    @venturi.task(kind="wf_sq", result=int)
    async def square(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n * carry.n)

    @venturi.task(kind="wf_sum")
    async def total(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn(f"sq{i}", square, Item(i)) for i in range(carry.n)]
        # A step between the spawns and the gather writes them first.
        await ctx.step("between", _noop)
        return venturi.complete(sum(await ctx.gather(*kids)))

    job_id = await total.enqueue(conn, Item(n))
    async with running(Worker(None, dsn, [total, square], poll_max=5, concurrency=4)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == sum(i * i for i in range(n))
    assert len(await _children(conn, job_id)) == n


async def _noop() -> int:
    return 0


async def test_a_spawn_inside_a_transactional_step_commits_with_the_step(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid6")
    async def kid(ctx: Context[Any], carry: Item) -> None:
        return None

    calls: Counter[str] = Counter()

    async def reserve(tx: asyncpg.Connection, ctx: Context[Any]) -> int:
        calls["reserve"] += 1
        child = await ctx.spawn("inside", kid, Item(1))
        # A statement of the function's own after the spawn, on the same connection.
        await tx.execute("SELECT 1")
        if calls["reserve"] == 1:
            raise RuntimeError("the step's transaction rolls back, the spawn with it")
        return int(child.job_id)

    @venturi.task(kind="wf_tx_parent", max_failures=3)
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.step("reserve", reserve, ctx, transactional=True))

    job_id = await parent.enqueue(conn, Item(0))
    async with running(Worker(None, dsn, [parent, kid], poll_max=5, concurrency=2)):
        await wait_status(conn, job_id, "completed")
    children = await conn.fetch("SELECT id FROM venturi.jobs WHERE parent_id = $1", job_id)
    assert calls["reserve"] == 2
    assert len(children) == 1
    recorded = await conn.fetchval(
        "SELECT (value #>> '{}')::bigint FROM venturi.steps WHERE job_id = $1 AND name = 'inside'",
        job_id,
    )
    assert recorded == children[0]["id"] == await venturi.get_result(conn, job_id)


async def test_a_spawn_refused_before_any_write_leaves_its_name_free(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A spawn refused for its group (or its carry) writes nothing; a handler that catches
    # the error may spawn under the same name. The name was already marked used, and the
    # second spawn failed the run: "the name 'child' is used twice in one run".
    @venturi.task(kind="wf_kid", result=int)
    async def kid(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wf_parent", result=int, max_failures=1)
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        with pytest.raises(venturi.ConfigError, match="group must be"):
            await ctx.spawn("child", kid, Item(1), group="")
        with pytest.raises(TypeError):
            await ctx.spawn("child", kid, "not an Item")
        with pytest.raises(venturi.VenturiError, match="must be a venturi task"):
            await ctx.spawn("child", "kid", Item(1))
        child = await ctx.spawn("child", kid, Item(7), group="fallback")
        return venturi.complete(sum(await ctx.gather(child)))

    job_id = await parent.enqueue(conn, Item(0), group="g")
    async with running(Worker(None, dsn, [kid, parent], poll_max=5, concurrency=2)):
        await wait_status(conn, job_id, "completed")
    assert await venturi.get_result(conn, job_id) == 7
    [child] = await _children(conn, job_id)
    assert child["name"] == "child"
