"""Spawns written together: a run's first ``ctx.spawn`` writes its child at once and
draws ids for the spawns after it, which are written in one statement before the run's
next statement or when the handler returns. Each child is still written with its record
in one statement, so a run that ends before the write leaves neither, and the next run
spawns them once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_status
from venturi import Context, db
from venturi.runtime.worker import Worker
from venturi.workflow.children import SPARE_IDS

S = "venturi"


async def _children(conn: asyncpg.Connection, parent: int) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT j.id, j.status, s.name FROM venturi.jobs j "
        "LEFT JOIN venturi.steps s ON s.job_id = $1 AND (s.value #>> '{}')::bigint = j.id "
        "WHERE j.parent_id = $1 ORDER BY j.id",
        parent,
    )


async def test_a_run_that_fails_after_its_spawns_leaves_only_the_written_ones_and_the_next_spawns_the_rest_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wf_kid", result=int)
    async def kid(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    runs: Counter[str] = Counter()
    seen_ids: list[list[int]] = []
    after_first: list[list[asyncpg.Record]] = []
    first_failed = asyncio.Event()

    @venturi.task(kind="wf_fan", max_failures=3)
    async def fan(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        runs["fan"] += 1
        kids = [await ctx.spawn(f"k{i}", kid, Item(i)) for i in range(5)]
        seen_ids.append([k.job_id for k in kids])
        if runs["fan"] == 1:
            # The four spawns after the first are not written yet: a failure now
            # leaves them unwritten, and the next run spawns them.
            side = await asyncpg.connect(dsn)  # the test's own is busy waiting
            try:
                after_first.append(await _children(side, ctx.job.id))
            finally:
                await side.close()
            first_failed.set()
            raise RuntimeError("the run fails before it writes its later spawns")
        return venturi.complete(sum(await ctx.gather(*kids)))

    job_id = await fan.enqueue(conn, Item(0))
    async with running(Worker(None, dsn, [fan, kid], poll_max=5, concurrency=4)):
        await wait_status(conn, job_id, "completed")
    assert first_failed.is_set()
    # The first run had written its first child only, with its record.
    assert [r["name"] for r in after_first[0]] == ["k0"]
    children = await _children(conn, job_id)
    assert sorted(r["name"] for r in children) == [f"k{i}" for i in range(5)]
    assert [r["status"] for r in children] == ["completed"] * 5
    assert await venturi.get_result(conn, job_id) == sum(range(5))
    # k0 kept its id; the others got new ones in the run that wrote them, and every
    # later run saw exactly the ids written.
    assert seen_ids[1][0] == seen_ids[0][0]
    assert seen_ids[-1] == [r["id"] for r in sorted(children, key=lambda r: r["name"])]
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == 6


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
        conn,
        schema=S,
        parent_id=parent,
        name="a",
        spec=kid.job(Item(1)),
        traceparent=None,
        spare=3,
    )
    spare = [int(i) for i in first["spare"]]
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
