"""Priority tiers inside a group (SPEC 13: "priority_ratio anti-starvation keep[s] its
meaning between tiers"): a claim reserved for the lower tiers takes them from a group
whose first job is of a higher tier, as it takes them from jobs without a group; and the
group keeps its place by its higher tier afterwards."""

from __future__ import annotations

from typing import Any

import asyncpg

import venturi
from tests.integration.test_groups import finish
from tests.support import Item
from venturi import Context, Priority, db
from venturi.priority import floor


async def claim_at(conn: Any, kind: str, level: int, limit: int = 1) -> list[asyncpg.Record]:
    """One claim of up to ``limit`` jobs at the priority floor ``level``, as the worker
    makes it."""
    got, _ = await db.groups.claim_grouped(
        conn,
        schema="venturi",
        claimant=db.Claimant("t"),
        kind=kind,
        lease=60.0,
        floor=level,
        limit=limit,
        limits=db.groups.GroupLimits(None, None, None),
    )
    return list(got.claimed)


async def test_a_reserved_claim_takes_the_lower_tier_of_a_group_headed_by_a_higher(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="g_tiers")
    async def tiered(ctx: Context[Any], carry: Item) -> None:
        return None

    high, normal, low = Priority.HIGH, Priority.NORMAL, Priority.LOW
    # acme: a steady stream of HIGH with a few LOW behind it; globex: NORMAL only.
    await venturi.enqueue_many(
        conn,
        [tiered.job(Item(i), group="acme", priority=high) for i in range(40)]
        + [tiered.job(Item(100 + i), group="acme", priority=low) for i in range(3)]
        + [tiered.job(Item(200 + i), group="globex", priority=normal) for i in range(20)],
    )
    got: list[tuple[int, int]] = []
    for n in range(1, 49):
        level = floor(n, 4)
        rows = await claim_at(conn, "g_tiers", level)
        assert len(rows) == 1, n
        got.append((n, rows[0]["priority"]))
        await finish(conn, rows)
    # As jobs without a group get them (priority_ratio 4): every 16th claim is LOW's,
    # every other 4th NORMAL's, the rest HIGH's. LOW was never claimed while acme had
    # HIGH jobs: its head tier hid it from the reserved claims.
    want = [(n, low if n % 16 == 0 else normal if n % 4 == 0 else high) for n in range(1, 49)]
    assert got == want
    # acme kept its place by its HIGH jobs after each claim of its LOW ones (a head
    # written as LOW put globex's NORMAL job ahead of acme's HIGH at the next claim).
    head = await conn.fetchval(
        "SELECT head FROM venturi.groups WHERE kind = 'g_tiers' AND grp = 'acme'"
    )
    assert head == high


async def test_a_reserved_claim_keeps_a_waking_better_job_as_the_groups_head(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A HIGH job enqueued into a ready group of LOW jobs: a claim reserved for LOW read
    # only the group's LOW jobs, applied (deleted) the HIGH job's wake-up, and wrote the
    # group's head as LOW; the HIGH job then waited behind every NORMAL group.
    @venturi.task(kind="g_waking")
    async def tiered(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(
        conn,
        [tiered.job(Item(i), group="acme", priority=Priority.LOW) for i in range(10)]
        + [tiered.job(Item(100 + i), group="globex", priority=Priority.NORMAL) for i in range(10)],
    )
    await finish(conn, await claim_at(conn, "g_waking", 0))  # the groups' rows, ready
    high = await tiered.enqueue(conn, Item(99), group="acme", priority=Priority.HIGH)
    taken = await claim_at(conn, "g_waking", 2)
    assert [r["priority"] for r in taken] == [Priority.LOW]
    await finish(conn, taken)
    [first] = await claim_at(conn, "g_waking", 0)
    assert first["id"] == high


async def test_a_reserved_claim_that_takes_a_groups_last_better_job_lowers_its_head(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # No job of the reserved tier anywhere: the claim's second look took acme's one HIGH
    # job, and the head stayed HIGH, so acme's NORMAL jobs went before globex's HIGH.
    @venturi.task(kind="g_last")
    async def tiered(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(
        conn,
        [tiered.job(Item(0), group="acme", priority=Priority.HIGH)]
        + [tiered.job(Item(1 + i), group="acme", priority=Priority.NORMAL) for i in range(5)]
        + [tiered.job(Item(100 + i), group="globex", priority=Priority.HIGH) for i in range(5)],
    )
    assert await claim_at(conn, "g_last", 0, limit=0) == []  # the groups' rows, ready
    # Test-side write: globex behind in the share, so acme is taken first.
    await conn.execute("UPDATE venturi.groups SET vtime = 5 WHERE grp = 'globex'")
    taken = await claim_at(conn, "g_last", 2)
    assert [(r["grp"], r["priority"]) for r in taken] == [("acme", Priority.HIGH)]
    await finish(conn, taken)
    order = []
    for _ in range(6):
        rows = await claim_at(conn, "g_last", 0)
        order += [r["priority"] for r in rows]
        await finish(conn, rows)
    assert order == [Priority.HIGH] * 5 + [Priority.NORMAL]
