"""Per-group rates (SPEC 13, ``group_rate``) across a deploy that changes them: a group out
of tokens is parked until its next token at the rate of the claim that parked it, and a
worker of a faster rate, or of none, moves that wake-up forward (migration 25)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import asyncpg

import venturi
from tests.integration.test_groups import claim, claim_all
from tests.support import Item, running
from tests.support.plans import nodes
from venturi import Context, db, sql
from venturi.runtime.worker import Worker

SCHEMA = "venturi"


async def wakes(conn: asyncpg.Connection, kind: str) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT grp, at - now() AS wait, rate FROM venturi.group_wakes WHERE kind = $1 "
            "ORDER BY grp, at",
            kind,
        )
    )


async def advance(conn: asyncpg.Connection, rates: dict[str, float | None]) -> list[str]:
    rows = await db.groups.group_refill_advance(conn, schema=SCHEMA, rates=rates)
    return sorted(r["grp"] for r in rows)


async def test_a_faster_rate_moves_the_token_wake_ups_an_older_one_made(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="g_rate", group_rate=venturi.Rate(per_second=0.001, burst=2))
    async def slow(ctx: Context[Any], carry: Item) -> None: ...

    await venturi.enqueue_many(
        conn, [slow.job(Item(i), group=g) for i in range(5) for g in ("a", "b")]
    )
    # A job scheduled an hour out has a wake-up of its own, which no rate moves.
    await slow.enqueue(conn, Item(9), group="c", after=3600)
    rows = await claim_all(conn, "g_rate", rate=(0.001, 2))
    assert Counter(r["grp"] for r in rows) == {"a": 2, "b": 2}
    before = await wakes(conn, "g_rate")
    # Parked until the next token at one a thousand seconds, the rate kept.
    assert [(w["grp"], w["rate"]) for w in before] == [("a", 0.001), ("b", 0.001), ("c", None)]
    assert all(w["wait"].total_seconds() > 900 for w in before)
    # The same rate, or a slower one (a deploy that lowered it), moves nothing: an
    # early wake-up would only cost a claim.
    assert await advance(conn, {"g_rate": 0.001}) == []
    assert await advance(conn, {"g_rate": 0.0001}) == []
    nothing = await claim(conn, "g_rate", rate=(0.001, 2))
    assert nothing._replace(next_wake=None) == db.groups.GroupedClaim([], None, 0, 0)
    assert nothing.next_wake is not None and nothing.next_wake > 900  # the next token's
    # A deploy that raised it to ten a second: the next token is due within 0.1 s.
    assert await advance(conn, {"g_rate": 10.0}) == ["a", "b"]
    after = await wakes(conn, "g_rate")
    assert [(w["grp"], w["rate"]) for w in after] == [("a", 10.0), ("b", 10.0), ("c", None)]
    assert all(w["wait"].total_seconds() < 0.1 for w in after[:2])
    assert after[2]["wait"].total_seconds() > 3500
    assert await advance(conn, {"g_rate": 10.0}) == []  # taken: not found again
    # Test-side write: the token's tenth of a second passed (seeded, not slept).
    await conn.execute(
        "UPDATE venturi.groups SET refilled_at = refilled_at - interval '1 s' "
        "WHERE kind = 'g_rate' AND grp IN ('a', 'b')"
    )
    await conn.execute(
        "UPDATE venturi.group_wakes SET at = at - interval '1 s' "
        "WHERE kind = 'g_rate' AND rate IS NOT NULL"
    )
    # (A bucket of one: however long the machine took since, one token each.)
    got = await claim(conn, "g_rate", rate=(10.0, 1))
    assert Counter(r["grp"] for r in got.claimed) == {"a": 1, "b": 1}


async def test_a_rate_removed_wakes_the_groups_that_wait_for_a_token_now(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="g_rate", group_cap=10)
    async def unlimited(ctx: Context[Any], carry: Item) -> None: ...

    await venturi.enqueue_many(conn, [unlimited.job(Item(i), group="a") for i in range(5)])
    assert len(await claim_all(conn, "g_rate", rate=(0.001, 1))) == 1
    assert await advance(conn, {"g_rate": None}) == ["a"]
    assert [(w["grp"], w["rate"]) for w in await wakes(conn, "g_rate")] == [("a", None)]
    assert len(await claim_all(conn, "g_rate")) == 4


async def test_a_worker_of_a_faster_rate_runs_the_groups_an_older_rate_parked(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The groups ran out of tokens under a rate of one token a thousand seconds (the
    # deploy before); the worker's task declares a hundred a second. Without the move,
    # its claims would find every group parked until its old wake-up, 1,000 s away.
    ran = asyncio.Queue[int]()

    @venturi.task(kind="g_rate", group_rate=venturi.Rate(per_second=100, burst=5))
    async def fast(ctx: Context[Any], carry: Item) -> None:
        ran.put_nowait(carry.n)

    jobs = [fast.job(Item(10 * g + i), group=f"t{g}") for g in range(3) for i in range(4)]
    await venturi.enqueue_many(conn, jobs)
    assert len(await claim_all(conn, "g_rate", rate=(0.001, 1))) == 3
    await conn.execute(
        "UPDATE venturi.jobs SET status = 'completed', claim_token = NULL "
        "WHERE kind = 'g_rate' AND status = 'claimed'"
    )
    async with running(Worker(None, dsn, [fast], concurrency=4, poll_max=30)):
        got = {await asyncio.wait_for(ran.get(), 10) for _ in range(9)}
    assert got == {10 * g + i for g in range(3) for i in range(1, 4)}


async def test_the_look_reads_the_token_wake_ups_alone(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Every worker runs the look about once a second: behind 2,000 wake-ups of scheduled
    # jobs it reads the kind's token wake-ups only (none here), through their index.
    @venturi.task(kind="g_rate", group_rate=venturi.Rate(per_second=1, burst=1))
    async def later(ctx: Context[Any], carry: Item) -> None: ...

    await venturi.enqueue_many(
        conn, [later.job(Item(i), group=f"g{i}", after=3600) for i in range(2000)]
    )
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    plan = await conn.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) "
        + sql.statement("group_refill_advance", SCHEMA).rstrip("; \n"),
        ["g_rate"],
        [None],
    )
    found = nodes(json.loads(plan))
    assert "group_wakes_rate_idx" in {n.get("Index Name") for n in found}
    read = [
        (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
        for n in found
        if "Actual Loops" in n
    ]
    assert sum(read) <= 10, sum(read)


async def test_a_group_out_of_tokens_keeps_one_token_wake_up_however_many_jobs_come(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Each job enqueued into a group out of tokens wakes it; the claim that finds it dry
    # parks it again until its next token. It wrote another wake-up for that time each
    # time (29 after 30 jobs), all coming due at once and filling a claim's look.
    @venturi.task(kind="g_dry", group_rate=venturi.Rate(per_second=0.001, burst=1))
    async def dry(ctx: Context[Any], carry: Item) -> None: ...

    for i in range(30):
        await dry.enqueue(conn, Item(i), group="a")
        await claim(conn, "g_dry", rate=(0.001, 1))
    left = await wakes(conn, "g_dry")
    assert [(w["grp"], w["rate"]) for w in left] == [("a", 0.001)]
    assert left[0]["wait"].total_seconds() > 900
    # The one left still wakes it: the token seeded due, its job runs.
    await conn.execute(
        "UPDATE venturi.groups SET refilled_at = refilled_at - interval '2000 s' "
        "WHERE kind = 'g_dry'"
    )
    await conn.execute("UPDATE venturi.group_wakes SET at = now() WHERE kind = 'g_dry'")
    got = await claim(conn, "g_dry", rate=(0.001, 1))
    assert len(got.claimed) == 1


async def test_a_better_job_into_a_group_out_of_tokens_wakes_it_at_its_tier(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The group's token wake-up was written at LOW; the claim that parked it again after
    # a HIGH job came found that wake-up at the same time and wrote none, so the group
    # woke at LOW and its HIGH job waited behind the NORMAL groups.
    @venturi.task(kind="g_dry_tier")
    async def dry(ctx: Context[Any], carry: Item) -> None: ...

    await venturi.enqueue_many(
        conn, [dry.job(Item(i), group="acme", priority=venturi.Priority.LOW) for i in range(5)]
    )
    await claim(conn, "g_dry_tier", limit=5, rate=(0.001, 1))  # one LOW, then dry
    assert [w["rate"] for w in await wakes(conn, "g_dry_tier")] == [0.001]
    await dry.enqueue(conn, Item(9), group="acme", priority=venturi.Priority.HIGH)
    got = await claim(conn, "g_dry_tier", limit=5, rate=(0.001, 1))
    assert got.claimed == []
    rows = await conn.fetch(
        "SELECT priority FROM venturi.group_wakes WHERE kind = 'g_dry_tier' ORDER BY priority"
    )
    assert rows and rows[0]["priority"] == venturi.Priority.HIGH


async def test_the_wake_up_a_claim_applies_does_not_stand_for_the_next_token(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # At a fast rate the next token is due within a millisecond of the wake-up the claim
    # just applied (and deleted): that one, seen by the claim's snapshot, stood for the
    # new one, and the group was left out of tokens with no wake-up. The timing is
    # searched for: a wake-up seeded a little later each time, due as the claim runs.
    @venturi.task(kind="g_fast")
    async def fast(ctx: Context[Any], carry: Item) -> None: ...

    await venturi.enqueue_many(conn, [fast.job(Item(i), group="acme") for i in range(400)])
    await claim(conn, "g_fast", limit=1, rate=(1.0, 5))  # the group's row
    for step in range(120):
        # Test-side writes: parked, 1.9999 tokens, the refill held (refilled ahead), one
        # token wake-up step/4 ms from now.
        await conn.execute(
            "WITH a AS (DELETE FROM venturi.group_wakes WHERE kind = 'g_fast') "
            "UPDATE venturi.groups SET ready = false, tokens = 1.9999, "
            "refilled_at = clock_timestamp() + interval '1 hour' WHERE kind = 'g_fast'"
        )
        await conn.execute(
            "INSERT INTO venturi.group_wakes (kind, grp, at, priority, rate) VALUES "
            "('g_fast', 'acme', clock_timestamp() + make_interval(secs => $1::float8), 1, 1.0)",
            step / 4000,
        )
        await claim(conn, "g_fast", limit=5, rate=(1.0, 5))
        left = await conn.fetchval("SELECT count(*) FROM venturi.group_wakes WHERE kind = 'g_fast'")
        ready = await conn.fetchval("SELECT ready FROM venturi.groups WHERE kind = 'g_fast'")
        assert ready or left > 0, step
