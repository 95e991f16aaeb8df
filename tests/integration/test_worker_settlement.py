"""The worker's settlement of a run, outcome by outcome of the design document (complete,
pause, retry, dead, an exception, a timeout), against PostgreSQL."""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

import venturi
from tests.support import (
    FAST,
    events,
    running,
    until_cancelled,
    wait_for,
    wait_status,
)
from tests.support import Item as N
from venturi import Backoff, Context, Priority
from venturi.runtime.worker import Worker


class Renamed(msgspec.Struct):
    url: str  # a required field that carries stored as N do not have


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
        if len(calls) == 3:
            # SPEC 2's signature, carry=None: without a carry, as the line above.
            return venturi.retry(carry=None, after=0, reason="None keeps it too")
        return venturi.complete()

    job_id = await _run_one(dsn, conn, handler, N(1), "completed")
    assert calls == [1, 10, 10, 10]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 3
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == [
        "enqueued",
        "claimed",
        "retried",
        "claimed",
        "retried",
        "claimed",
        "retried",
        "claimed",
        "completed",
    ]
    assert journal[2].detail == "keep this carry"
    assert journal[6].detail == "None keeps it too"


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
