"""The worker, behaviour by behaviour of the design document, against PostgreSQL: the
loop and its claim filter, per-kind caps, wake-ups, priority and configuration (its
settlement and its recovery are test_worker_settlement and test_worker_recovery)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item as N
from tests.support import (
    events,
    expire_claim,
    running,
    status_of,
    until_cancelled,
    wait_for,
    wait_stat,
    wait_status,
)
from tests.support.claims import LoseClaimAnswer, claim
from venturi import Backoff, ConfigError, Context, Priority, db, sql
from venturi.runtime.worker import Worker

# --- the loop and the claim filter ------------------------------------------------------


async def test_drains_with_at_most_n_in_flight(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    now = {"in": 0, "max": 0}
    seen: list[int] = []
    four = asyncio.Event()

    @venturi.task(kind="w_loop")
    async def handler(ctx: Context[Any], carry: N) -> None:
        now["in"] += 1
        now["max"] = max(now["max"], now["in"])
        if now["in"] == 4:
            four.set()
        # The first runs hold their slots until four run at once: on a loaded server a
        # claim could take longer than a run, and four never overlapped by chance.
        await four.wait()
        await asyncio.sleep(0.005)  # stays: a run long enough for a fifth to overlap
        seen.append(carry.n)
        now["in"] -= 1

    ids = await venturi.enqueue_many(conn, [handler.job(N(i)) for i in range(60)])
    worker = Worker(None, dsn, [handler], concurrency=4, poll_max=0.2)
    async with running(worker):
        await wait_for(lambda: _all_status(conn, ids, "completed"))
    assert sorted(seen) == list(range(60))
    assert now["max"] == 4
    for i in ids[:3]:
        job = await venturi.get_job(conn, i)
        assert job is not None and job.attempt == 1 and job.finished_at is not None
        assert events(await venturi.get_journal(conn, i)) == ["enqueued", "claimed", "completed"]


async def _all_status(conn: Any, ids: list[int], status: str) -> bool:
    return all([await status_of(conn, i) == status for i in ids])


async def test_serial_with_n_1(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> None:
    order: list[int] = []

    @venturi.task(kind="w_serial")
    async def handler(ctx: Context[Any], carry: N) -> None:
        order.append(carry.n)
        await asyncio.sleep(0.002)  # stays: a yield mid-run, where a second run would interleave
        order.append(-carry.n)

    ids = await venturi.enqueue_many(conn, [handler.job(N(i)) for i in range(1, 6)])
    async with running(Worker(None, dsn, [handler], concurrency=1, poll_max=0.2)):
        await wait_for(lambda: _all_status(conn, ids, "completed"))
    assert order == [x for i in range(1, 6) for x in (i, -i)]  # never interleaved


async def test_claims_only_registered_kinds(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_mine")
    async def mine(ctx: Context[Any], carry: N) -> None:
        return None

    @venturi.task(kind="w_theirs")
    async def theirs(ctx: Context[Any], carry: N) -> None:
        raise AssertionError("never runs")

    other = await theirs.enqueue(conn, N(1))
    own = await mine.enqueue(conn, N(2))
    async with running(Worker(None, dsn, [mine], poll_max=0.1)):
        await wait_status(conn, own, "completed")
    job = await venturi.get_job(conn, other)
    assert job is not None and job.status == "pending" and job.attempt == 0


async def test_delayed_job_invisible_until_due(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started: list[float] = []

    @venturi.task(kind="w_later")
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.append(time.monotonic())

    t0 = time.monotonic()
    job_id = await handler.enqueue(conn, N(1), after=0.6)
    # poll_max is long: only the next-visible timer can wake the worker in time.
    async with running(Worker(None, dsn, [handler], poll_max=30)):
        # The deadline (10 s, a third of poll_max) decides "in time"; the delay must pass.
        await wait_status(conn, job_id, "completed", within=10)
    assert started[0] - t0 >= 0.55


# --- per-kind caps ------------------------------------------------------------------------


async def test_cap_keeps_jobs_pending_while_others_run(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    capped_running = {"now": 0, "max": 0}
    free_done: list[int] = []

    @venturi.task(kind="w_capped", cap=1)
    async def capped(ctx: Context[Any], carry: N) -> None:
        capped_running["now"] += 1
        capped_running["max"] = max(capped_running["max"], capped_running["now"])
        await gate.wait()
        capped_running["now"] -= 1

    @venturi.task(kind="w_free")
    async def free(ctx: Context[Any], carry: N) -> None:
        free_done.append(carry.n)

    capped_ids = await venturi.enqueue_many(conn, [capped.job(N(i)) for i in range(3)])
    free_ids = await venturi.enqueue_many(conn, [free.job(N(i)) for i in range(20)])
    async with running(Worker(None, dsn, [capped, free], concurrency=4, poll_max=0.1)):
        await wait_for(lambda: _all_status(conn, free_ids, "completed"))
        statuses = [await status_of(conn, i) for i in capped_ids]
        # One capped job holds its slot; the others wait as pending, not claimed-and-idle.
        assert sorted(str(s) for s in statuses) == ["claimed", "pending", "pending"]
        gate.set()
        await wait_for(lambda: _all_status(conn, capped_ids, "completed"))
    assert capped_running["max"] == 1
    assert len(free_done) == 20


async def test_register_overrides_the_task_cap(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    peak = {"now": 0, "max": 0}
    three = asyncio.Event()

    @venturi.task(kind="w_cap_override", cap=1)
    async def handler(ctx: Context[Any], carry: N) -> None:
        peak["now"] += 1
        peak["max"] = max(peak["max"], peak["now"])
        if peak["now"] == 3:
            three.set()
        # The first runs hold their slots until three run at once, rather than overlap by
        # chance (test_drains_with_at_most_n_in_flight says why).
        await three.wait()
        await asyncio.sleep(0.02)  # stays: a run long enough for runs over the cap to overlap
        peak["now"] -= 1

    ids = await venturi.enqueue_many(conn, [handler.job(N(i)) for i in range(12)])
    worker = Worker(None, dsn, concurrency=8, poll_max=0.1).register(handler, cap=3)
    async with running(worker):
        await wait_for(lambda: _all_status(conn, ids, "completed"))
    assert peak["max"] == 3


# --- wakeups ----------------------------------------------------------------------------


async def test_notification_wakes_an_idle_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    ran = asyncio.Event()

    @venturi.task(kind="w_notify")
    async def handler(ctx: Context[Any], carry: N) -> None:
        ran.set()

    worker = Worker(None, dsn, [handler], poll_max=30)
    async with running(worker):
        await wait_for(lambda: _listening(worker))
        await wait_stat(worker, "empty_claims", 1)  # found nothing: now in its 30 s idle wait
        await handler.enqueue(conn, N(1))
        # Well inside the idle wait: only the notification can have woken it.
        await asyncio.wait_for(ran.wait(), 5)
        assert worker.stats["claimed"] == 1


async def _listening(worker: Worker[Any]) -> bool:
    return worker.listening


async def test_notify_fires_for_every_write_that_makes_work_claimable(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    got: list[str] = []
    listener_got = asyncio.Event()

    def on(_c: Any, _p: int, _ch: str, payload: str) -> None:
        got.append(payload)
        listener_got.set()

    listen = await asyncpg.connect(dsn)
    await listen.add_listener(sql.channel("venturi"), on)

    async def expect(action: Any) -> None:
        listener_got.clear()
        got.clear()
        await action
        await asyncio.wait_for(listener_got.wait(), 5)
        assert got == ["w_n"]

    @venturi.task(kind="w_n")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    @venturi.task(kind="w_n_later")
    async def later(ctx: Context[Any], carry: N) -> None:
        return None

    try:
        me, bo = db.Claimant("t:1"), Backoff.fixed(0)
        await expect(handler.enqueue(conn, N(1)))  # enqueue
        (row,) = await claim(conn, me, ["w_n"])
        await expect(
            db.settle.job_fail_if_owned(
                conn,
                schema="venturi",
                claimant=me,
                job_id=row["id"],
                attempt=row["attempt"],
                event="retried",
                error="r",
                carry=None,
                delay=0,
                force_dead=False,
            )
        )
        (row,) = await claim(conn, me, ["w_n"])
        await expect(
            db.settle.job_pause_if_owned(
                conn,
                schema="venturi",
                claimant=me,
                job_id=row["id"],
                attempt=row["attempt"],
                carry='{"n":2}',
                at=None,
                after=None,
            )
        )
        (row,) = await claim(conn, me, ["w_n"])
        await expect(
            db.settle.job_release_if_owned(
                conn,
                schema="venturi",
                claimant=me,
                job_id=row["id"],
                attempt=row["attempt"],
                detail="test",
            )
        )
        (row,) = await claim(conn, me, ["w_n"], lease=0.001)
        await expire_claim(conn, row["id"])
        await expect(
            db.claims.job_recover_stale(conn, schema="venturi", recoverer="sweeper", backoff=bo)
        )  # recovery
        # A claim (pending -> claimed) is not claimable work: no notification. The next
        # payload heard after it is that of a later write that does notify (in commit
        # order, on the same connection).
        listener_got.clear()
        got.clear()
        await claim(conn, me, ["w_n"])
        await later.enqueue(conn, N(3))
        await asyncio.wait_for(listener_got.wait(), 5)
        assert got[0] == "w_n_later"
    finally:
        await listen.close()


# --- priority and anti-starvation -------------------------------------------------------


async def _claim_order(
    dsn: str, conn: Any, ratio: int | None, per_tier: int, take: int
) -> list[Priority]:
    order: list[Priority] = []
    gate = asyncio.Event()

    @venturi.task(kind=f"w_prio_{ratio}")
    async def handler(ctx: Context[Any], carry: N) -> None:
        order.append(ctx.job.priority)
        if len(order) >= take:
            gate.set()

    jobs = [
        handler.job(N(i), priority=p)
        for p in (Priority.LOW, Priority.NORMAL, Priority.HIGH)
        for i in range(per_tier)
    ]
    await venturi.enqueue_many(conn, jobs)
    async with running(
        Worker(None, dsn, [handler], concurrency=1, poll_max=0.1, priority_ratio=ratio)
    ):
        await asyncio.wait_for(gate.wait(), 30)
    return order[:take]


async def test_strict_priority(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> None:
    order = await _claim_order(dsn, conn, None, 10, 30)
    assert order == [Priority.HIGH] * 10 + [Priority.NORMAL] * 10 + [Priority.LOW] * 10


async def test_weighted_anti_starvation(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    order = await _claim_order(dsn, conn, 2, 40, 33)
    # The worker starts idle: its first claim is one job in claim order (job_claim_one),
    # which takes no turn of the cadence. Then, claiming with completions riding, ratio
    # 2: claims 2, 6, 10, ... reserve NORMAL+; claims 4, 8, ... reserve LOW.
    assert order[0] == Priority.HIGH
    counts = {p: order[1:].count(p) for p in Priority}
    assert counts == {Priority.HIGH: 16, Priority.NORMAL: 8, Priority.LOW: 8}
    assert order[1:5] == [Priority.HIGH, Priority.NORMAL, Priority.HIGH, Priority.LOW]


async def test_empty_reserved_tier_falls_back(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    done = asyncio.Event()
    seen: list[int] = []

    @venturi.task(kind="w_prio_fallback")
    async def handler(ctx: Context[Any], carry: N) -> None:
        seen.append(carry.n)
        if len(seen) == 8:
            done.set()

    await venturi.enqueue_many(conn, [handler.job(N(i), priority=Priority.HIGH) for i in range(8)])
    async with running(
        Worker(None, dsn, [handler], concurrency=1, poll_max=30, priority_ratio=2)
    ) as _:
        await asyncio.wait_for(done.wait(), 10)  # poll_max 30: no reserved slot idled
    assert sorted(seen) == list(range(8))


async def test_a_reserved_claim_takes_its_tiers_first_then_every_tier_at_once(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_prio_one")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    high = [await handler.enqueue(conn, N(i), priority=Priority.HIGH) for i in range(3)]
    low = await handler.enqueue(conn, N(9), priority=Priority.LOW)
    me = db.Claimant("t:1")
    # Reserved for LOW: the LOW job, then the rest from every tier in their order (the
    # two oldest HIGH), in one statement, as a second claim at floor 0 would have.
    rows = await claim(conn, me, ["w_prio_one"], limit=3, floor=Priority.LOW)
    assert sorted(r["id"] for r in rows) == sorted([low, high[0], high[1]])
    # Reserved for NORMAL with no NORMAL or LOW left: every tier, nothing taken twice.
    assert [r["id"] for r in await claim(conn, me, ["w_prio_one"], limit=3, floor=1)] == [high[2]]
    # At floor 0 nothing is reserved, nothing falls back.
    assert await claim(conn, me, ["w_prio_one"], limit=3) == []


@pytest.mark.parametrize(
    "limit",
    [{"rate": venturi.Rate(per_second=100_000, burst=1_000, shared=True)}, {"global_cap": 100}],
    ids=["shared rate", "global cap"],
)
async def test_kinds_with_claims_of_their_own_keep_the_anti_starvation(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limit: dict[str, Any]
) -> None:
    # Their claims took every tier in order: the kind's LOW jobs ran none of the first
    # 1,200 runs behind 1,500 HIGH ones (a kind without either limit: about a quarter).
    order: list[int] = []
    enough = asyncio.Event()

    @venturi.task(kind="w_prio_limited", **limit)
    async def handler(ctx: Context[Any], carry: N) -> None:
        order.append(ctx.job.priority)
        if len(order) == 400:
            enough.set()

    tiers = (Priority.HIGH, Priority.LOW)
    await venturi.enqueue_many(
        conn, [handler.job(N(i), priority=p) for p in tiers for i in range(500)]
    )
    async with running(Worker(None, dsn, [handler], concurrency=4, poll_max=30)):
        await asyncio.wait_for(enough.wait(), 30)
    low = order[:400].count(Priority.LOW) / 400
    assert 0.15 <= low <= 0.35, low  # every 4th claim reserved for NORMAL and LOW


async def test_a_reserved_capped_claim_takes_its_tiers_first_then_every_tier_at_once(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_prio_capped", global_cap=10)
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    high = [await handler.enqueue(conn, N(i), priority=Priority.HIGH) for i in range(3)]
    low = await handler.enqueue(conn, N(9), priority=Priority.LOW)
    me = db.Claimant("t:1")

    async def capped(limit: int, floor: int) -> list[int]:
        rows, _ = await db.claims.job_claim_capped(
            conn,
            schema=sql.DEFAULT_SCHEMA,
            claimant=me,
            kind="w_prio_capped",
            lease=60.0,
            limit=limit,
            global_cap=10,
            floor=floor,
        )
        return sorted(r["id"] for r in rows)

    # As job_claim's: the LOW job, then the two oldest HIGH, in one statement; then every
    # tier when none of the reserved tiers is left; nothing taken twice.
    assert await capped(3, Priority.LOW) == sorted([low, high[0], high[1]])
    assert await capped(3, Priority.NORMAL) == [high[2]]
    assert await capped(3, Priority.HIGH) == []


# --- configuration ----------------------------------------------------------------------


async def test_no_tasks_and_unapplied_schema(empty_dsn: str, kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="register at least one task"):
        await Worker(None, empty_dsn).run(asyncio.Event())

    @venturi.task(kind="w_noschema")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    with pytest.raises(venturi.SchemaError, match="venturi schema apply"):
        await Worker(None, empty_dsn, [handler]).run(asyncio.Event())
    with pytest.raises(venturi.ConnectError, match=r"\*\*\*"):
        await Worker(None, "postgresql://u:pw@127.0.0.1:1/x", [handler]).run(asyncio.Event())


async def test_a_pool_too_small_for_the_worker_is_refused_when_it_is_built(
    dsn: str, kinds: list[str]
) -> None:
    @venturi.task(kind="w_small_pool")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    # With one connection the LISTEN session held it and the worker waited for another
    # for good, silent and deaf to its shutdown; with two, recovery and the heartbeat
    # waited behind the loop.
    for size in (1, 2):
        small = await asyncpg.create_pool(dsn, min_size=1, max_size=size)
        try:
            with pytest.raises(ConfigError, match=f"at least 3 connections, got {size}"):
                Worker(None, small, [handler])
        finally:
            await small.close()


async def test_worker_on_a_user_pool(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_pool")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    ids = await venturi.enqueue_many(conn, [handler.job(N(i)) for i in range(10)])
    async with running(Worker(None, pool, [handler], poll_max=0.1)):
        await wait_for(lambda: _all_status(conn, ids, "completed"))
    assert not pool._closed  # the worker leaves a pool it was given open


async def test_recovery_and_settles_are_logged_with_job_fields(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    @venturi.task(kind="w_logged")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await handler.enqueue(conn, N(1))
    await claim(conn, db.Claimant("ghost:7"), ["w_logged"], lease=0.001)
    await expire_claim(conn, job_id)
    caplog.set_level(logging.DEBUG, logger="venturi")
    async with running(Worker(None, dsn, [handler], poll_max=0.1, backoff=Backoff.fixed(0))):
        await wait_status(conn, job_id, "completed")
    recovered = [r for r in caplog.records if r.name == "venturi.recovery"]
    assert len(recovered) == 1 and recovered[0].levelno == logging.WARNING
    assert "ghost:7 presumed dead" in recovered[0].getMessage()
    assert (recovered[0].job_id, recovered[0].kind, recovered[0].attempt) == (job_id, "w_logged", 1)  # type: ignore[attr-defined]
    settles = [
        r for r in caplog.records if r.name == "venturi.worker" and "settled job" in r.getMessage()
    ]
    assert settles and settles[-1].levelno == logging.DEBUG
    assert (settles[-1].job_id, settles[-1].attempt) == (job_id, 2)  # type: ignore[attr-defined]


async def test_cancelled_run_releases_its_running_jobs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="w_abandon")
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.set()
        await until_cancelled()

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1)
    run = asyncio.create_task(worker.run(asyncio.Event()))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()  # what a supervisor does to a loop it gives up on
    with pytest.raises(asyncio.CancelledError):
        await run
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 0
    assert events(await venturi.get_journal(conn, job_id))[-1] == "released"
    assert worker.tasks == {"w_abandon": handler}


async def test_claims_whose_answer_was_lost_are_released_not_left_to_the_lease(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_orphan", lease=3600)
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        lossy = LoseClaimAnswer(pool)
        lossy.armed = True
        job_id = await handler.enqueue(conn, N(1))
        worker = Worker(None, lossy, [handler], poll_max=0.1)
        async with running(worker):
            await wait_status(conn, job_id, "completed", within=10)  # not after an hour
        assert worker.stats["orphans_released"] == 1
        trail = events(await venturi.get_journal(conn, job_id))
        assert trail == ["enqueued", "claimed", "released", "claimed", "completed"]
    finally:
        await pool.close()


async def test_completions_that_rode_a_claim_whose_answer_was_lost_count_as_completed(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    lossy = LoseClaimAnswer(pool)

    @venturi.task(kind="w_rode", lease=3600)
    async def handler(ctx: Context[Any], carry: N) -> None:
        # The next claim carries this job's completion, claims the other job, commits,
        # and its answer is lost.
        lossy.armed = carry.n == 1

    try:
        first = await handler.enqueue(conn, N(1))
        second = await handler.enqueue(conn, N(2))
        worker = Worker(None, lossy, [handler], concurrency=1, poll_max=0.1)
        async with running(worker):
            await wait_status(conn, second, "completed", within=10)
        # The completion had applied: counted as one, not as a claim lost to another
        # worker ("skipped settling ... no longer holds its claim").
        assert worker.stats["completed"] == 2 and worker.stats["ownership_lost"] == 0
        assert worker.stats["orphans_released"] == 1
        assert events(await venturi.get_journal(conn, first)) == [
            "enqueued",
            "claimed",
            "completed",
        ]
    finally:
        await pool.close()
