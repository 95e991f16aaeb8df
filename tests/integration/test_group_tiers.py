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


async def claim_one(conn: Any, kind: str, level: int) -> list[asyncpg.Record]:
    """One claim of one job at the priority floor ``level``, as the worker makes it."""
    got, _ = await db.groups.claim_grouped(
        conn,
        schema="venturi",
        claimant=db.Claimant("t"),
        kind=kind,
        lease=60.0,
        floor=level,
        limit=1,
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
        rows = await claim_one(conn, "g_tiers", level)
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
