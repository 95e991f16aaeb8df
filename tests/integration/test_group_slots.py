"""A group's slot freed on one worker while its next job waits on another, idle, worker
(SPEC 13): a settlement notifies nobody, so the idle worker looks again in CAP_RECHECK,
as for a kind at its global cap, not after poll_max."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_stat, wait_until
from venturi import Context, db
from venturi.runtime.worker import Worker


async def test_an_idle_worker_takes_a_slot_another_worker_freed_as_it_stopped(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    started: list[int] = []

    @venturi.task(kind="g_freed", group_cap=1)
    async def held(ctx: Context[Any], carry: Item) -> None:
        started.append(carry.n)
        if carry.n == 1:
            await gate.wait()

    await held.enqueue(conn, Item(1), group="acme")
    a = Worker(None, dsn, [held], concurrency=1, poll_max=60)
    b = Worker(None, dsn, [held], concurrency=2, poll_max=60)
    stop_a = asyncio.Event()
    run_a = asyncio.ensure_future(a.run(stop_a))
    try:
        await wait_until(lambda: started == [1])
        await held.enqueue(conn, Item(2), group="acme")
        async with running(b):
            # B found the group at its cap (twice: its first claims), and is idle.
            await wait_stat(b, "empty_claims", 2)
            assert started == [1]
            # A stops, as in a deploy: its run ends and settles, and it claims no more.
            stop_a.set()
            gate.set()
            await asyncio.wait_for(run_a, 30)
            # Without the look B slept poll_max (60 s here) before it claimed again.
            await wait_until(lambda: started == [1, 2], within=10)
    finally:
        gate.set()
        stop_a.set()
        await asyncio.wait_for(run_a, 30)


async def test_the_idle_lookup_says_a_group_holds_a_due_job_only_at_its_cap(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="g_freed", group_cap=1)
    async def held(ctx: Context[Any], carry: Item) -> None: ...

    async def lookup() -> bool:
        found = await db.claims.job_next_visible_at(
            conn, schema="venturi", kinds=["g_freed"], all_kinds=["g_freed"]
        )
        return found.groups_held

    async def claim() -> int:
        """A worker's claim, as before its lookup: how many it took."""
        got, _ = await db.groups.claim_grouped(
            conn,
            schema="venturi",
            claimant=db.Claimant("t"),
            kind="g_freed",
            lease=60.0,
            floor=0,
            limit=5,
            limits=db.groups.GroupLimits(1, None, None),
        )
        return len(got.claimed)

    await held.enqueue(conn, Item(1), group="acme")
    await held.enqueue(conn, Item(2), group="acme", after=3600)
    assert await claim() == 1
    assert not await lookup()  # the job left waits for its time, not for the slot
    await held.enqueue(conn, Item(3), group="acme")
    assert await claim() == 0
    assert await lookup()
    # The slot freed after that claim, before the lookup (another worker's settlement,
    # test-side here): still an answer. Asking for a job claimed as well, the lookup
    # said nothing then, and the worker slept poll_max (the first test, under load).
    await conn.execute(
        "UPDATE venturi.jobs SET status = 'completed', claim_token = NULL "
        "WHERE kind = 'g_freed' AND status = 'claimed'"
    )
    assert await lookup()
    await venturi.set_group(conn, "g_freed", "acme", paused=True)
    assert not await lookup()  # paused: its resume notifies
