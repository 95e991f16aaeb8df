"""The worker's ownership guard, stale recovery and graceful shutdown, by the design
document, against PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    FAST,
    events,
    expire_claim,
    make_due,
    running,
    until_cancelled,
    wait_for,
    wait_status,
    wait_until,
)
from tests.support import Item as N
from tests.support.claims import claim
from venturi import Backoff, Context, db
from venturi.runtime.worker import Worker

# A worker that claims and then dies (its claims expire and are recovered).
GHOST = db.Claimant("ghost:9")


# --- the ownership guard and stale recovery -------------------------------------------


async def test_settle_after_reclaim_is_skipped(conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="w_own")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await handler.enqueue(conn, N(1))
    bo = Backoff.fixed(0)
    a_1, b_2 = db.Claimant("a:1"), db.Claimant("b:2")
    (a,) = await claim(conn, a_1, ["w_own"], lease=0.001)
    await expire_claim(conn, job_id)
    # A claim does not recover: the expired claim waits for a recovery (B's timer's).
    assert (await claim(conn, b_2, ["w_own"])) == []
    await db.claims.job_recover_stale(conn, schema="venturi", recoverer="b:2", backoff=bo)
    (b,) = await claim(conn, b_2, ["w_own"])
    assert a["id"] == b["id"] == job_id and b["attempt"] == 2
    # A, late: every settle path is refused.
    assert (
        await db.settle.job_complete_many_if_owned(
            conn, schema="venturi", claimant=a_1, ids=[job_id], attempts=[1], results=[None]
        )
        == set()
    )
    assert not await db.settle.job_pause_if_owned(
        conn,
        schema="venturi",
        claimant=a_1,
        job_id=job_id,
        attempt=1,
        carry='{"n":9}',
        at=None,
        after=None,
    )
    assert (
        await db.settle.job_fail_if_owned(
            conn,
            schema="venturi",
            claimant=a_1,
            job_id=job_id,
            attempt=1,
            event="failed",
            error="x",
            carry=None,
            delay=0,
            force_dead=False,
        )
        is None
    )
    assert not await db.settle.job_dead_if_owned(
        conn, schema="venturi", claimant=a_1, job_id=job_id, attempt=1, reason="x"
    )
    assert not await db.settle.job_release_if_owned(
        conn, schema="venturi", claimant=a_1, job_id=job_id, attempt=1, detail="x"
    )
    # Same claimant but the old attempt: refused too.
    assert (
        await db.settle.job_complete_many_if_owned(
            conn, schema="venturi", claimant=b_2, ids=[job_id], attempts=[1], results=[None]
        )
        == set()
    )
    job = await venturi.get_job(conn, job_id)
    assert (
        job is not None
        and job.status == "claimed"
        and job.claimed_by == "b:2"
        and job.carry == {"n": 1}
    )
    assert await db.settle.job_complete_many_if_owned(
        conn, schema="venturi", claimant=b_2, ids=[job_id], attempts=[2], results=[None]
    ) == {job_id}


async def test_slow_handler_loses_its_claim_and_its_settle_is_skipped(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()
    runs: list[str] = []

    @venturi.task(kind="w_slow", lease=0.3, backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        runs.append(str(ctx.job.attempt))
        if ctx.job.attempt == 1:
            await release.wait()
            return venturi.complete("late")
        return venturi.complete("second")

    job_id = await handler.enqueue(conn, N(1))
    caplog.set_level(logging.WARNING, logger="venturi.worker")
    slow = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="slow:1")
    fast = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="fast:2")
    async with running(slow):
        await wait_for(lambda: _attempt_is(conn, job_id, 1))
        async with running(fast):
            await wait_status(conn, job_id, "completed")
        release.set()
        await wait_until(lambda: slow.stats["ownership_lost"] == 1)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.result == "second" and job.claimed_by == "fast:2"
    assert "no longer holds its claim" in caplog.text
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "stale-recovered", "claimed", "completed"]
    assert "slow:1 presumed dead" in (journal[2].detail or "")


async def _attempt_is(conn: Any, job_id: int, n: int) -> bool:
    job = await venturi.get_job(conn, job_id)
    return job is not None and job.attempt == n


async def test_stale_claim_recovered_with_backoff_and_counted(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_stale", max_failures=2)
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await handler.enqueue(conn, N(1))
    bo = Backoff.exponential(60, factor=2, cap=3600, jitter=False)
    await claim(conn, GHOST, ["w_stale"], lease=0.001)
    await expire_claim(conn, job_id)
    recovered = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=bo
    )
    assert [(r["id"], r["status"], r["claimed_by"]) for r in recovered] == [
        (job_id, "pending", "ghost:9")
    ]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 1 and job.status == "pending"
    assert timedelta(seconds=55) < job.visible_at - datetime.now(UTC) < timedelta(seconds=65)
    assert (
        await db.claims.job_recover_stale(conn, schema="venturi", recoverer="sweeper:1", backoff=bo)
        == []
    )  # nothing left
    # Invisible during its backoff: a claim finds nothing.
    assert await claim(conn, GHOST, ["w_stale"], lease=0.001) == []
    # Once due, claimed again; the second expiry reaches the backstop (2): dead.
    await make_due(conn, job_id)
    assert [r["id"] for r in await claim(conn, GHOST, ["w_stale"], lease=0.001)] == [job_id]
    await expire_claim(conn, job_id)
    recovered = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=bo
    )
    assert [(r["id"], r["status"]) for r in recovered] == [(job_id, "dead")]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "dead" and job.failures == 2
    assert events(await venturi.get_journal(conn, job_id))[-2:] == ["stale-recovered", "dead"]


async def test_recovery_to_dead_at_backstop(conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="w_stale_dead", max_failures=1)
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await handler.enqueue(conn, N(1))
    await claim(conn, GHOST, ["w_stale_dead"], lease=0.001)
    await expire_claim(conn, job_id)
    (r,) = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=FAST
    )
    assert r["status"] == "dead"
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "stale-recovered", "dead"]
    assert journal[2].worker == "sweeper:1" and "ghost:9" in (journal[2].detail or "")


async def test_task_lease_overrides_the_worker_default(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()

    @venturi.task(kind="w_lease_long", lease=timedelta(hours=3))
    async def long(ctx: Context[Any], carry: N) -> None:
        await gate.wait()

    @venturi.task(kind="w_lease_default")
    async def short(ctx: Context[Any], carry: N) -> None:
        await gate.wait()

    a = await long.enqueue(conn, N(1))
    b = await short.enqueue(conn, N(1))
    async with running(
        Worker(None, dsn, [long, short], concurrency=2, lease=120, poll_max=0.1, shutdown_timeout=1)
    ):
        await wait_status(conn, a, "claimed")
        await wait_status(conn, b, "claimed")
        ja, jb = await venturi.get_job(conn, a), await venturi.get_job(conn, b)
        assert ja is not None and jb is not None and ja.claim_expires_at and jb.claim_expires_at
        assert ja.claimed_at is not None and jb.claimed_at is not None
        assert ja.claim_expires_at - ja.claimed_at == timedelta(hours=3)
        assert jb.claim_expires_at - jb.claimed_at == timedelta(seconds=120)
        gate.set()


# --- graceful shutdown ----------------------------------------------------------------


async def test_cooperative_shutdown_pauses(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="w_coop")
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        started.set()
        await ctx.cancelled()
        assert ctx.is_cancelled()
        return venturi.pause(N(carry.n + 1))

    job_id = await handler.enqueue(conn, N(1))
    # A shutdown_timeout far past the deadline below: the run ends within the deadline only
    # if the handler's pause ended it, not the timeout.
    worker = Worker(None, dsn, [handler], poll_max=0.1, shutdown_timeout=600)
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    await asyncio.wait_for(started.wait(), 10)
    shutdown.set()
    await asyncio.wait_for(run, 30)
    job = await venturi.get_job(conn, job_id)
    assert (
        job is not None and job.status == "pending" and job.carry == {"n": 2} and job.failures == 0
    )
    assert events(await venturi.get_journal(conn, job_id))[-1] == "paused"
    assert not worker.listening


async def test_forced_shutdown_releases(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @venturi.task(kind="w_stubborn")
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.set()
        try:
            await until_cancelled()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1, shutdown_timeout=0.3)
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    await asyncio.wait_for(started.wait(), 10)
    t0 = time.monotonic()
    shutdown.set()
    await asyncio.wait_for(run, 10)
    assert time.monotonic() - t0 >= 0.25  # shutdown_timeout ran out before the cancel
    assert cancelled.is_set()
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 0
    assert job.visible_at <= datetime.now(UTC)
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "released"]
