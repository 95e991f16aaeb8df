"""``@venturi.task(retry_on=...)``: only the named exceptions are retried; any other
settles the job dead at once, journaled failed then dead with the reason; and the
worker's stop line counts a job whose retries ran out as dead."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, events, running, wait_status
from venturi import Backoff, Context
from venturi.runtime.worker import Worker


class Flaky(Exception):
    pass


class FlakierStill(Flaky):
    pass


async def test_an_exception_not_in_retry_on_settles_dead_at_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="ro_dead", retry_on=(Flaky, ConnectionError), backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        raise ValueError("bad input")

    job_id = await handler.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.1)):
        await wait_status(conn, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and (job.attempt, job.failures) == (1, 1)
    assert job.last_error is not None and "ValueError: bad input" in job.last_error
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "failed", "dead"]
    assert journal[-1].detail == (
        "retry_on: ValueError is not one of (Flaky, ConnectionError); not retried"
    )


async def test_an_exception_in_retry_on_is_retried_subclasses_too(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    attempts: list[int] = []

    @venturi.task(kind="ro_retry", retry_on=Flaky, backoff=Backoff.fixed(0), max_failures=5)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        attempts.append(ctx.job.attempt)
        if ctx.job.attempt == 1:
            raise Flaky("try again")
        if ctx.job.attempt == 2:
            raise FlakierStill("and again")
        return None

    job_id = await handler.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.1)):
        await wait_status(conn, job_id, "completed")
    assert attempts == [1, 2, 3]
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal).count("failed") == 2
    assert "dead" not in events(journal)


async def test_without_retry_on_every_exception_is_retried(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="ro_default", backoff=Backoff.fixed(0), max_failures=2)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        raise ValueError("always")

    job_id = await handler.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.1)):
        await wait_status(conn, job_id, "dead")
    journal = await venturi.get_journal(conn, job_id)
    # Two executions: the backstop, not retry_on, made it dead.
    assert events(journal).count("failed") == 2
    assert journal[-1].detail == "failure backstop reached (2 of 2)"


async def test_the_stop_line_counts_jobs_whose_retries_ran_out_as_dead(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    @venturi.task(kind="ro_count", backoff=Backoff.fixed(0), max_failures=2)
    async def raising(ctx: Context[Any], carry: Item) -> None:
        raise ValueError("always")

    @venturi.task(kind="ro_count_retry", max_failures=2)
    async def retrying(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.retry(after=0, reason="later")

    @venturi.task(kind="ro_count_miss", retry_on=Flaky)
    async def missing(ctx: Context[Any], carry: Item) -> None:
        raise ValueError("not retried")

    caplog.set_level(logging.INFO, logger="venturi.worker")
    ids = [await t.enqueue(conn, Item(1)) for t in (raising, retrying, missing)]
    worker = Worker(None, dsn, [raising, retrying, missing], poll_max=0.1)
    async with running(worker):
        for job_id in ids:
            await wait_status(conn, job_id, "dead")
    # Each job that went dead is one dead, whether its last failure was a raise, a
    # retry outcome or a retry_on miss; only the failures it survived count as failed
    # (or retried).
    assert (worker.stats["dead"], worker.stats["failed"], worker.stats["retry"]) == (3, 1, 1)
    [stopped] = [r.getMessage() for r in caplog.records if " stopped after " in r.getMessage()]
    assert stopped.endswith("ran 5 jobs (1 failed, 1 retried, 3 dead)"), stopped
