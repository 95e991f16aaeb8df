"""The worker, behaviour by behaviour of the design document, against PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import Item as N
from tests.support import (
    expire_claim,
    make_due,
    running,
    status_of,
    until_cancelled,
    wait_for,
    wait_stat,
    wait_status,
    wait_until,
)
from tests.support.claims import claim, claimed_in, is_claim
from venturi import Backoff, ConfigError, Context, Priority, db, sql
from venturi.runtime.worker import Worker

FAST = Backoff.fixed(0.05)
# A worker that claims and then dies (its claims expire and are recovered).
GHOST = db.Claimant("ghost:9")


class Renamed(msgspec.Struct):
    url: str  # a required field that carries stored as N do not have


def events(journal: list[venturi.JournalEntry]) -> list[str]:
    return [e.event for e in journal]


# --- the loop and the claim filter ------------------------------------------------------


async def test_drains_with_at_most_n_in_flight(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    now = {"in": 0, "max": 0}
    seen: list[int] = []

    @venturi.task(kind="w_loop")
    async def handler(ctx: Context[Any], carry: N) -> None:
        now["in"] += 1
        now["max"] = max(now["max"], now["in"])
        await asyncio.sleep(0.005)  # stays: a run long enough for four to overlap
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

    @venturi.task(kind="w_cap_override", cap=1)
    async def handler(ctx: Context[Any], carry: N) -> None:
        peak["now"] += 1
        peak["max"] = max(peak["max"], peak["now"])
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


# --- settlement -------------------------------------------------------------------------


async def _run_one(
    dsn: str, conn: Any, task: venturi.Task[Any], carry: Any, until: str, **kw: Any
) -> int:
    """Run a worker over one job until it reaches status ``until`` after being claimed."""
    job_id = await task.enqueue(conn, carry)

    async def reached() -> bool:
        job = await venturi.get_job(conn, job_id)
        return job is not None and job.attempt >= 1 and job.status == until

    async with running(Worker(None, dsn, [task], poll_max=0.1, **kw)):
        await wait_for(reached)
    return job_id


async def test_complete_stores_the_result(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_result")
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        return venturi.complete({"double": carry.n * 2})

    job_id = await _run_one(dsn, conn, handler, N(21), "completed")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.result == {"double": 42} and job.failures == 0


async def test_pause_checkpoints_and_resumes(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: list[int] = []

    @venturi.task(kind="w_pause")
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        seen.append(carry.n)
        if carry.n < 3:
            return venturi.pause(N(carry.n + 1))
        return venturi.complete()

    job_id = await _run_one(dsn, conn, handler, N(1), "completed")
    assert seen == [1, 2, 3]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 0 and job.attempt == 3 and job.carry == {"n": 3}
    assert events(await venturi.get_journal(conn, job_id)) == [
        "enqueued",
        "claimed",
        "paused",
        "claimed",
        "paused",
        "claimed",
        "completed",
    ]


async def test_pause_until_later(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="w_pause_later")
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        return venturi.pause(N(carry.n + 1), after=timedelta(hours=1))

    job_id = await _run_one(dsn, conn, handler, N(1), "pending", concurrency=1)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.carry == {"n": 2}
    assert job.visible_at > datetime.now(UTC) + timedelta(minutes=59)


async def test_retry_with_and_without_carry(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    calls: list[int] = []

    @venturi.task(kind="w_retry", backoff=FAST, max_failures=5)
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        calls.append(carry.n)
        if len(calls) == 1:
            return venturi.retry(N(10), reason="keep this carry")
        if len(calls) == 2:
            return venturi.retry(reason="keep the pre-run carry")
        return venturi.complete()

    job_id = await _run_one(dsn, conn, handler, N(1), "completed")
    assert calls == [1, 10, 10]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 2
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == [
        "enqueued",
        "claimed",
        "retried",
        "claimed",
        "retried",
        "claimed",
        "completed",
    ]
    assert journal[2].detail == "keep this carry"


async def test_retry_after_overrides_backoff(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_retry_after", backoff=FAST)
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        return venturi.retry(after=timedelta(hours=2))

    job_id = await _run_one(dsn, conn, handler, N(1), "pending", concurrency=1)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 1
    assert job.visible_at > datetime.now(UTC) + timedelta(hours=1)


async def test_dead_outcome(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="w_dead")
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        return venturi.dead("gone for good")

    job_id = await _run_one(dsn, conn, handler, N(1), "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.last_error == "gone for good" and job.failures == 0
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "dead"]
    assert journal[-1].detail == "gone for good"


async def test_exception_retries_with_backoff_then_dies_at_backstop(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    runs: list[int] = []

    @venturi.task(kind="w_raise", backoff=Backoff.fixed(0.3), max_failures=3)
    async def handler(ctx: Context[Any], carry: N) -> None:
        runs.append(ctx.job.attempt)
        raise RuntimeError(f"boom {carry.n}")

    job_id = await _run_one(dsn, conn, handler, N(7), "dead")
    assert runs == [1, 2, 3]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 3 and job.carry == {"n": 7}
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == [
        "enqueued",
        "claimed",
        "failed",
        "claimed",
        "failed",
        "claimed",
        "failed",
        "dead",
    ]
    # Each retry waited out the backoff (0.3 s) after its failure, on the database's clock.
    for fail, retry in [(journal[2], journal[3]), (journal[4], journal[5])]:
        assert retry.at - fail.at >= timedelta(seconds=0.25)
    failed = journal[2]
    assert failed.detail is not None and "Traceback" in failed.detail and "boom 7" in failed.detail
    assert failed.worker == f"{socket.gethostname()}:{os.getpid()}"
    assert journal[-1].detail == "failure backstop reached (3 of 3)"


async def test_exception_discards_the_mutated_carry(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: list[int] = []

    @venturi.task(kind="w_mutate", backoff=FAST, max_failures=2)
    async def handler(ctx: Context[Any], carry: N) -> None:
        seen.append(carry.n)
        carry.n += 100
        raise ValueError("after mutating")

    await _run_one(dsn, conn, handler, N(1), "dead")
    assert seen == [1, 1]


async def test_failures_to_dead(dsn: str, conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="w_f2d", backoff=FAST, max_failures=10)
    async def handler(ctx: Context[Any], carry: N) -> None:
        raise RuntimeError("panic")

    job_id = await _run_one(dsn, conn, handler, N(1), "dead", failures_to_dead=True)
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "failed", "dead"]
    assert "failures_to_dead" in (journal[-1].detail or "")


async def test_timeout_is_a_failed_execution(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_timeout", timeout=0.1, backoff=FAST, max_failures=2)
    async def handler(ctx: Context[Any], carry: N) -> None:
        await until_cancelled()  # past any timeout

    job_id = await _run_one(dsn, conn, handler, N(1), "dead")
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "timed-out", "claimed", "timed-out", "dead"]
    assert "timeout of 0.1s" in (journal[2].detail or "")


async def test_not_an_outcome_is_a_failure_naming_it(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_badreturn", max_failures=1)
    async def handler(ctx: Context[Any], carry: N) -> Any:
        return {"oops": 1}

    job_id = await _run_one(dsn, conn, handler, N(1), "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and "handler returned dict" in (job.last_error or "")


async def test_undecodable_carry_dies_without_retry(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="w_evolve_old")
    async def old(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await old.enqueue(conn, N(1))
    venturi.tasks.unregister("w_evolve_old")
    ran: list[Any] = []

    @venturi.task(kind="w_evolve_old", max_failures=5)
    async def new(ctx: Context[Any], carry: Renamed) -> None:
        ran.append(carry)

    async with running(Worker(None, dsn, [new], poll_max=0.1)):
        await wait_status(conn, job_id, "dead")
    assert ran == []
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 0 and job.attempt == 1
    assert "no longer decodes" in (job.last_error or "") and "url" in (job.last_error or "")


async def test_sync_handler_runs_in_a_thread(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    threads: list[int] = []

    @venturi.task(kind="w_sync")
    def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        time.sleep(0.01)  # stays: a blocking call, which a plain def handler may make
        threads.append(threading.get_ident())
        return venturi.complete(carry.n)

    job_id = await _run_one(dsn, conn, handler, N(3), "completed")
    assert threads and threads[0] != threading.get_ident()
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.result == 3


async def test_state_and_context_reach_the_handler(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    got: list[Any] = []

    @venturi.task(kind="w_ctx", priority=Priority.LOW)
    async def handler(ctx: Context[dict[str, int]], carry: N) -> None:
        got.append(
            (ctx.state["x"], ctx.job.kind, ctx.job.priority, ctx.job.attempt, ctx.job.failures)
        )
        ctx.log.info("hello from the job")

    job_id = await handler.enqueue(conn, N(1))
    async with running(Worker({"x": 5}, dsn, [handler], poll_max=0.1)):
        await wait_status(conn, job_id, "completed")
    assert got == [(5, "w_ctx", Priority.LOW, 1, 0)]


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


class LoseClaimAnswer:
    """A real pool whose next claim commits but whose answer is lost, as when the
    connection dies between the commit and the reply."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetch(self, query: str, *args: Any, **kw: Any) -> Any:
        rows = await self._pool.fetch(query, *args, **kw)
        if self.armed and is_claim(query) and claimed_in(rows):
            self.armed = False
            raise ConnectionResetError("connection lost after the claim committed")
        return rows


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
