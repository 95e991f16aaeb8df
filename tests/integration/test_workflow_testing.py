"""venturi.testing runs a workflow end to end in a test, children included, without
waiting for its timers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg

import venturi
import venturi.testing
from tests.support import Item
from venturi import Context


async def test_drain_runs_a_workflow_with_children_and_a_day_long_sleep(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wft_child", result=int)
    async def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n * 2)

    @venturi.task(kind="wft_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.sleep("a day", timedelta(days=1))
        kids = [await ctx.spawn(f"c{i}", child, Item(i)) for i in range(3)]
        got = await ctx.gather(*kids)
        try:
            await ctx.wait_for_signal("never", str, timeout=timedelta(hours=1))
        except venturi.SignalTimeout:
            pass
        return venturi.complete(sum(got))

    job_id = await parent.enqueue(conn, Item(1))
    # Without the fast-forward drain would stop with the job waiting on its day.
    done = await venturi.testing.drain(dsn, [parent, child])
    assert done[job_id].status == "completed"
    assert done[job_id].result == 6
    assert sum(1 for j in done.values() if j.kind == "wft_child") == 3


async def test_drain_leaves_a_workflow_waiting_for_a_signal_without_timeout(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wft_approve")
    async def approve(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        who = await ctx.wait_for_signal("approval", str)
        return venturi.complete(who)

    job_id = await approve.enqueue(conn, Item(1))
    first = await venturi.testing.drain(dsn, [approve])
    assert first[job_id].status == "waiting"
    assert await venturi.signal(conn, job_id, "approval", "ann")
    second = await venturi.testing.drain(dsn, [approve])
    assert second[job_id].status == "completed" and second[job_id].result == "ann"
