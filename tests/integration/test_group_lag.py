"""SPEC 13's fair share: a group banks no credit. A group held at its cap is not idle, yet
its virtual time stands while the groups with room run: it is no measure of where a
waking group starts, and a cap raised lets it run no further ahead than its share. A
weight changed leaves a group neither credit nor a debt of its old weight's steps."""

from __future__ import annotations

from collections import Counter

import asyncpg
import pytest

import venturi
from tests.integration.test_groups import claim, finish
from tests.support import Item
from venturi import Context

KIND = "lag"


@pytest.fixture
def lag(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind=KIND)
    async def handler(ctx: Context[object], carry: Item) -> None: ...

    return handler


async def take(conn: asyncpg.Connection, claims: int) -> Counter[str]:
    """``claims`` claims of four, each finished before the next: the jobs of each group."""
    got: Counter[str] = Counter()
    for _ in range(claims):
        rows = (await claim(conn, KIND, limit=4)).claimed
        got.update(r["grp"] for r in rows)
        await finish(conn, rows)
    return got


async def test_a_group_held_at_its_cap_is_no_measure_and_banks_nothing_when_raised(
    conn: asyncpg.Connection, lag: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [lag.job(Item(i), group=g) for i in range(300) for g in ("a", "b")]
    )
    await venturi.set_group(conn, KIND, "a", cap=1)
    # a holds its one slot (its job runs on), while b runs a hundred jobs.
    held, ran = [], Counter[str]()
    while ran["b"] < 100:
        rows = (await claim(conn, KIND, limit=5)).claimed
        ran.update(r["grp"] for r in rows)
        held += [r for r in rows if r["grp"] == "a"]
        await finish(conn, [r for r in rows if r["grp"] == "b"])
    assert ran["a"] == 1
    # A group waking now starts where b is, not where a stands: b and c share the claims
    # (a is at its cap). It started at a's time, and took all 40 before b had one.
    await venturi.enqueue_many(conn, [lag.job(Item(i), group="c") for i in range(200)])
    got = await take(conn, 10)
    assert got["a"] == 0 and 16 <= got["b"] <= 24, got
    # a's cap raised, its job done: a, b and c share the claims. It took all 40 before.
    await venturi.set_group(conn, KIND, "a", cap=None)
    await finish(conn, held)
    got = await take(conn, 15)
    assert all(15 <= got[g] <= 25 for g in "abc"), got


async def test_a_weight_changed_back_leaves_neither_credit_nor_debt(
    conn: asyncpg.Connection, lag: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [lag.job(Item(i), group=g) for i in range(400) for g in ("a", "b")]
    )
    # Credit: at the least weight a runs nothing while b runs a hundred jobs; its time
    # stands. Given its weight back, it took every one of the next 40 jobs.
    await venturi.set_group(conn, KIND, "a", weight=1e-6)
    got = await take(conn, 25)
    assert got == Counter(b=100), got
    await venturi.set_group(conn, KIND, "a", weight=None)
    got = await take(conn, 10)
    assert 15 <= got["a"] <= 25, got
    # Debt: one claim of a at the least weight put it a million ahead (as the seed does
    # here); given its weight back, it waited for b's next million jobs.
    await venturi.set_group(conn, KIND, "a", weight=1e-6)
    await conn.execute(
        "UPDATE venturi.groups SET vtime = vtime + 1e6 WHERE kind = $1 AND grp = 'a'", KIND
    )
    await venturi.set_group(conn, KIND, "a", weight=None)
    got = await take(conn, 10)
    assert 15 <= got["a"] <= 25, got
    # A change within a share moves nothing: a, within a step of b, stays where it is
    # at weight 0.5 (a step of 2).
    before = await conn.fetchval("SELECT vtime FROM venturi.groups WHERE grp = 'a'")
    least = await conn.fetchval("SELECT vtime FROM venturi.groups WHERE grp = 'b'")
    await venturi.set_group(conn, KIND, "a", weight=0.5)
    after = await conn.fetchval("SELECT vtime FROM venturi.groups WHERE grp = 'a'")
    assert after == max(before, least), (before, least, after)


async def test_groups_of_the_greatest_weight_share_at_a_large_virtual_time(
    conn: asyncpg.Connection, lag: venturi.Task[Item]
) -> None:
    # In float8 a step of 1e-6 (weight 1e6) is rounded away once a kind's virtual time
    # passes about 1.8e10, which a group at the least weight reaches alone in 18,000
    # claims (seeded here): two groups of the greatest weight stood at one time, and one
    # took every claim of one job (100 of 100).
    await venturi.enqueue_many(
        conn, [lag.job(Item(i), group=g) for i in range(100) for g in ("p", "q")]
    )
    for g in ("p", "q"):
        await venturi.set_group(conn, KIND, g, weight=1e6)
    await conn.execute("UPDATE venturi.groups SET vtime = 3e10 WHERE kind = $1", KIND)
    got: Counter[str] = Counter()
    for _ in range(100):
        rows = (await claim(conn, KIND, limit=1)).claimed
        got.update(r["grp"] for r in rows)
        await finish(conn, rows)
    assert 45 <= got["p"] <= 55 and got.total() == 100, got
