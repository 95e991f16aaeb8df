"""Global caps: ``@venturi.task(global_cap=N)`` bounds the jobs of a kind claimed across
every worker together, enforced by the claim under a per-kind lock."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    Item,
    expire_claim,
    running,
    wait_for,
    wait_status,
    wait_until,
    waits_on_a_lock,
)
from venturi import Backoff, ConfigError, Context, JobSpec, db, sql
from venturi.backoff import DEFAULT_BACKOFF
from venturi.runtime.worker import Worker

SCHEMA = "venturi"


async def _capped(
    conn: Any, claimant: db.Claimant, kind: str, *, cap: int, wanted: int = 5
) -> db.claims.CappedClaim:
    return await db.claims.claim_within_cap(
        conn,
        schema=SCHEMA,
        claimant=claimant,
        kind=kind,
        lease=60.0,
        global_cap=cap,
        wanted=wanted,
    )


@pytest.mark.parametrize("grouped", [False, True], ids=["plain", "grouped"])
async def test_three_workers_racing_a_global_cap_of_two_never_run_three(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], grouped: bool
) -> None:
    # Grouped, the jobs are claimed by the grouped claim under the same lock, and the
    # completions riding it free their places in it.
    active = 0
    peak = 0
    done = 0
    two = asyncio.Event()

    @venturi.task(kind="gc_race", global_cap=2, group_cap=10 if grouped else None)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        nonlocal active, peak, done
        active += 1
        peak = max(peak, active)
        if active == 2:
            two.set()
        try:
            # The first run holds its place until a second runs beside it, so that the cap
            # is reached, not only never passed, on a loaded machine too.
            await two.wait()
            await asyncio.sleep(0.03)  # stays: work long enough for the others to race
        finally:
            active -= 1
            done += 1

    jobs = [handler.job(Item(i), group=f"g{i % 3}" if grouped else None) for i in range(24)]
    ids = await venturi.enqueue_many(conn, jobs)
    workers = [
        Worker(None, dsn, [handler], concurrency=4, poll_max=0.2, claimed_by=f"w{i}")
        for i in range(3)
    ]
    async with running(workers[0]), running(workers[1]), running(workers[2]):
        await wait_until(lambda: done == 24, within=60)
    assert peak == 2, f"{peak} handlers ran at once under a global cap of 2"
    for job_id in ids:
        assert (await venturi.get_job(conn, job_id)).status == "completed"  # type: ignore[union-attr]
    # Every worker had room for 4: the cap, not the slots, held them to 2 together.
    assert sum(w.stats["claimed"] for w in workers) == 24


async def test_a_claim_waiting_on_the_cap_lock_counts_the_claims_committed_meanwhile(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="gc_lock")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(5)])
    first = await asyncpg.connect(dsn)
    second = await asyncpg.connect(dsn)
    try:
        tx = first.transaction()
        await tx.start()
        # The claim takes the kind's cap lock and holds it until this transaction ends.
        rows, held = await db.claims.job_claim_capped(
            first,
            schema=SCHEMA,
            claimant=db.Claimant("a"),
            kind="gc_lock",
            lease=60.0,
            limit=5,
            global_cap=2,
        )
        assert (len(rows), held) == (2, 2)
        racing = asyncio.create_task(_capped(second, db.Claimant("b"), "gc_lock", cap=2))
        await wait_for(lambda: waits_on_a_lock(conn, second.get_server_pid()))
        await tx.commit()
        answer = await asyncio.wait_for(racing, 15)
        # Its snapshot came after the lock: it saw the two claims and took none.
        assert (answer.claimed, answer.held) == ([], 2)
    finally:
        await first.close()
        await second.close()


async def test_released_and_recovered_jobs_free_their_places(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="gc_free")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(6)])
    me = db.Claimant("w")
    first = await _capped(conn, me, "gc_free", cap=2)
    assert (len(first.claimed), first.held) == (2, 2)
    assert (await _capped(conn, me, "gc_free", cap=2)).claimed == []
    a, b = first.claimed
    assert await db.settle.job_release_if_owned(
        conn, schema=SCHEMA, claimant=me, job_id=a["id"], attempt=a["attempt"], detail="test"
    )
    again = await _capped(conn, me, "gc_free", cap=2)
    assert (len(again.claimed), again.held) == (1, 2)
    await expire_claim(conn, b["id"])
    await db.claims.job_recover_stale(conn, schema=SCHEMA, recoverer="r", backoff=DEFAULT_BACKOFF)
    after = await _capped(conn, me, "gc_free", cap=2)
    assert (len(after.claimed), after.held) == (1, 2)


async def test_a_paused_kind_is_not_claimed_under_its_cap(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="gc_paused")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    await handler.enqueue(conn, Item(1))
    await db.kinds.kind_pause(conn, schema=SCHEMA, kinds=["gc_paused"], paused_by="t", reason="")
    assert (await _capped(conn, db.Claimant("w"), "gc_paused", cap=2)).claimed == []


async def test_register_overrides_the_global_cap_and_a_capped_kind_still_retries(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: list[int] = []

    @venturi.task(kind="gc_reg", backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        seen.append(ctx.job.attempt)
        if ctx.job.attempt == 1:
            raise RuntimeError("once")

    job_id = await handler.enqueue(conn, Item(1))
    worker = Worker(None, dsn, poll_max=0.2).register(handler, global_cap=1)
    async with running(worker):
        await wait_status(conn, job_id, "completed")
    assert seen == [1, 2]
    with pytest.raises(ConfigError, match="global_cap must be an integer >= 1"):
        Worker(None, dsn).register(handler, global_cap=0)
    with pytest.raises(ConfigError, match="global_cap must be an integer >= 1"):

        @venturi.task(kind="gc_bad", global_cap=-1)
        async def bad(ctx: Context[Any], carry: Item) -> None:
            return None


async def test_a_capped_kind_with_a_shared_rate_limit_keeps_both(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="gc_rate")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(6)])
    me = db.Claimant("w")

    async def take(wanted: int) -> db.claims.CappedClaim:
        return await db.claims.claim_within_cap(
            conn,
            schema=SCHEMA,
            claimant=me,
            kind="gc_rate",
            lease=60.0,
            global_cap=2,
            wanted=wanted,
            rate=(0.001, 3),  # three tokens, then hardly any
        )

    first = await take(5)
    assert (len(first.claimed), first.held, first.wait) == (2, 2, 0.0)  # the cap
    for row in first.claimed:
        await db.settle.job_complete_many_if_owned(
            conn, schema=SCHEMA, claimant=me, ids=[row["id"]], attempts=[1], results=[None]
        )
    second = await take(5)
    assert len(second.claimed) == 1  # the bucket's last token, though the cap has room
    third = await take(5)
    assert third.claimed == [] and third.wait > 0  # out of tokens: when the next one comes


@pytest.mark.parametrize("grouped", [False, True], ids=["without groups", "grouped"])
async def test_a_worker_claims_the_places_its_own_runs_free_at_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], grouped: bool
) -> None:
    # One worker of 4 slots under a global cap of 2: each claim finds the kind at its cap
    # (its own two runs), and the worker left the kind alone for half a second
    # (CAP_RECHECK, which waits for places other workers hold), so 60 jobs of 10 ms took
    # 15 s. Its own runs ending now free their places for the next claim at once.
    ran = 0

    @venturi.task(kind="gc_own", global_cap=2, group_cap=2 if grouped else None)
    async def work(ctx: Context[Any], carry: Item) -> None:
        nonlocal ran
        await asyncio.sleep(0.01)  # stays: a run that still holds its place at the next claim
        ran += 1

    jobs = [work.job(Item(i), group=f"t{i % 3}" if grouped else None) for i in range(60)]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [work], concurrency=4, poll_max=30)
    async with running(worker):
        await wait_until(lambda: ran == 60, within=6)  # not after 15 s


async def test_a_capped_claim_reaches_its_rows_by_index(conn: asyncpg.Connection) -> None:
    # claim_capped's statements, as PostgreSQL plans them inside the function
    # (auto_explain of nested statements, sent to this client): on 20,000 rows none
    # reads the jobs table whole. Its UPDATE once joined the candidates and hashed the
    # table for every claim (migration 13).
    specs = [JobSpec("capped", "{}", 1, None, None, None, 25) for _ in range(20_000)]
    await db.enqueue.job_insert_many(conn, schema="venturi", specs=specs)
    await conn.execute(sql.statement("maintenance/analyze"))
    plans: list[str] = []
    conn.add_log_listener(lambda _c, message: plans.append(message.message))
    await conn.execute(sql.statement("maintenance/session_setting"), "client_min_messages", "log")
    await conn.execute("LOAD 'auto_explain'")
    for name, value in (
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_nested_statements", "on"),
    ):
        await conn.execute(sql.statement("maintenance/session_setting"), name, value)
    claim = await _capped(conn, db.Claimant("w"), "capped", cap=5, wanted=3)
    assert len(claim.claimed) == 3 and claim.held == 3
    nested = [p for p in plans if "candidates" in p]
    assert nested, plans
    assert not any("Seq Scan on jobs" in p for p in nested), nested
