"""Worker options beyond the design document: lease renewal, rate limits, and operator
cancellation of a running job."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    Item,
    events,
    expire_claim,
    running,
    wait_for,
    wait_stat,
    wait_status,
    wait_until,
)
from tests.support import sql as pgsql
from tests.support.claims import claim
from venturi import Backoff, Context, admin
from venturi.rate import Rate
from venturi.runtime.worker import Worker

# --- lease renewal ----------------------------------------------------------------------


async def test_renewed_lease_keeps_a_long_job_from_running_twice(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    runs: list[int] = []
    claimed = asyncio.Event()
    release = asyncio.Event()

    # A lease of 1 s renewed every third of it: 0.67 s of slack per renewal. (A 0.3 s
    # lease, 0.2 s of slack, ran the job twice once under the loaded full suite.)
    @venturi.task(kind="o_long", lease=1.0, renew_lease=True, backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        runs.append(ctx.job.attempt)
        claimed.set()
        await release.wait()

    job_id = await handler.enqueue(conn, Item(1))
    first = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="first:1")
    second = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="second:2")
    async with running(first), running(second):
        await asyncio.wait_for(claimed.wait(), 20)
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.claimed_at is not None
        other = second if job.claimed_by == "first:1" else first
        # The handler runs on until three and a half leases have passed on the database's
        # clock, and the other worker has claimed (a claim recovers expired leases first)
        # since: without renewal, that claim would have taken the job.
        past = job.claimed_at + timedelta(seconds=3.5)
        await wait_for(lambda: _clock_past(conn, past), within=30)
        looked = other.stats["empty_claims"]
        await wait_until(lambda: other.stats["empty_claims"] >= looked + 2 or len(runs) > 1)
        release.set()
        assert runs == [1]
        await wait_status(conn, job_id, "completed", within=20)
    assert runs == [1]
    assert first.stats["leases_renewed"] + second.stats["leases_renewed"] >= 3
    assert events(await venturi.get_journal(conn, job_id)) == ["enqueued", "claimed", "completed"]


async def test_without_renewal_the_same_long_job_runs_twice(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    runs: list[int] = []
    rerun = asyncio.Event()

    @venturi.task(kind="o_long_plain", lease=0.3, backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        runs.append(ctx.job.attempt)
        if ctx.job.attempt == 1:
            # Past its lease until recovered and run again meanwhile.
            await asyncio.wait_for(rerun.wait(), 20)
        else:
            rerun.set()

    job_id = await handler.enqueue(conn, Item(1))
    first = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="first:1")
    second = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="second:2")
    async with running(first), running(second):
        await wait_status(conn, job_id, "completed", within=20)
        await wait_until(lambda: len(runs) >= 2)
    assert runs[:2] == [1, 2]
    assert "stale-recovered" in events(await venturi.get_journal(conn, job_id))


async def _clock_past(conn: asyncpg.Connection, when: datetime) -> bool:
    return bool(await conn.fetchval(pgsql.statement("clock_now")) > when)


class ThreadWorker:
    """A worker on its own event loop in a thread: it keeps running while a handler
    blocks the test's event loop."""

    def __init__(self, worker: Worker[Any]) -> None:
        self.worker = worker
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._main(),))

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        self.ready.set()
        await self.worker.run(self.stop)

    def __enter__(self) -> ThreadWorker:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None and self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


async def test_renewal_that_finds_the_claim_lost_cancels_the_handler(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    stopped = asyncio.Event()
    claimed = asyncio.Event()
    go = asyncio.Event()
    rerun = threading.Event()  # set by the run in the other worker's thread
    blocked_until_rerun: list[bool] = []

    @venturi.task(kind="o_lost", lease=0.3, renew_lease=True, backoff=Backoff.fixed(0))
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        if ctx.job.attempt == 1:
            claimed.set()
            await go.wait()
            # A handler that blocks its event loop past its lease: no renewal can run,
            # and the worker in the other thread recovers the job and runs it meanwhile.
            blocked_until_rerun.append(rerun.wait(30))
            await asyncio.wait_for(ctx.cancelled(), 10)
            stopped.set()
            return venturi.complete("late")
        rerun.set()
        return venturi.complete("second")

    blocked = Worker(None, dsn, [handler], poll_max=0.1, claimed_by="blocked:1")
    other = Worker(
        None, dsn, [handler], poll_max=0.05, claimed_by="other:2", backoff=Backoff.fixed(0)
    )
    job_id = await handler.enqueue(conn, Item(1))
    async with running(blocked):
        await asyncio.wait_for(claimed.wait(), 10)
        with ThreadWorker(other):
            go.set()
            await wait_status(conn, job_id, "completed", within=20)
            await asyncio.wait_for(stopped.wait(), 10)
            await wait_until(lambda: blocked.stats["ownership_lost"] == 1)
    assert blocked_until_rerun == [True]
    assert blocked.stats["claims_lost"] == 1
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.result == "second" and job.claimed_by == "other:2"


async def _claimed_by(conn: Any, job_id: int, who: str) -> bool:
    job = await venturi.get_job(conn, job_id)
    return job is not None and job.status == "claimed" and job.claimed_by == who


# --- rate limits -----------------------------------------------------------------------


async def test_rate_limit_paces_claims(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started: list[float] = []

    @venturi.task(kind="o_rated", rate=Rate(per_second=20, burst=2))
    async def rated(ctx: Context[Any], carry: Item) -> None:
        started.append(time.monotonic())

    @venturi.task(kind="o_unrated")
    async def free(ctx: Context[Any], carry: Item) -> None:
        return None

    await venturi.enqueue_many(conn, [rated.job(Item(i)) for i in range(30)])
    free_ids = await venturi.enqueue_many(conn, [free.job(Item(i)) for i in range(30)])
    # poll_max is long: only the token timer can wake the worker between claims. The
    # deadline is far above the 1.4 s the jobs need and far below poll_max, so a missed
    # wake fails it and a slow machine alone does not. (Issue 39: 20 s failed twice under a
    # load of 10 to 18 on two cores, and 90 s once more under 18: a wake missed, not slowness;
    # left to the runtime's owners.)
    worker = Worker(None, dsn, [rated, free], concurrency=8, poll_max=300)
    t0 = time.monotonic()
    async with running(worker):
        await wait_until(lambda: len(started) == 30, within=90)
        for i in free_ids:
            await wait_status(conn, i, "completed")
    # 2 at once, then 28 more at 20/s: at least 1.4 s, and never faster than 20/s (with
    # some slack for the clock's resolution). How close to 20/s it gets is a benchmark's
    # question; here the deadline above bounds it from the other side.
    assert started[-1] - t0 >= 1.35
    assert started[-1] - started[1] >= 28 / 22


async def test_register_overrides_rate(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started: list[float] = []

    @venturi.task(kind="o_rate_override", rate=Rate(per_second=1000, burst=100))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        started.append(time.monotonic())

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(6)])
    worker = Worker(None, dsn, concurrency=4, poll_max=30).register(
        handler, rate=Rate(per_second=10, burst=1)
    )
    async with running(worker):
        await wait_until(lambda: len(started) == 6, within=20)
    # The task's own rate would start all six at once. Measured from the second start: the
    # first claim also prepares the statement, so under load it lags the bucket's first
    # token and shortens the span from the first start (0.42 s seen for 0.5 s of tokens).
    assert started[-1] - started[1] >= 0.35  # 4 intervals of 0.1 s


# --- operator cancel of a running job ---------------------------------------------------


async def test_cancel_of_a_running_job_reaches_its_context(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="o_cancel")
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        started.set()
        await ctx.cancelled()
        return venturi.pause(carry)

    job_id = await handler.enqueue(conn, Item(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1, heartbeat=0.05)
    async with running(worker):
        await asyncio.wait_for(started.wait(), 10)
        changes = await admin.cancel_jobs(conn, [job_id], operator="ops")
        assert [c.done for c in changes] == [True]
        await wait_status(conn, job_id, "cancelled")
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "cancelled"]
    assert "cancelled by an operator" in (journal[-1].detail or "")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 0 and job.finished_at is not None


# --- metrics ------------------------------------------------------------------------------


async def test_metrics_endpoint_is_scraped(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    import socket
    import urllib.request

    @venturi.task(kind="o_metrics", backoff=Backoff.fixed(0), max_failures=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        if carry.n == 0:
            raise RuntimeError("one failure")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ids = await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(4)])
    worker = Worker(None, dsn, [handler], poll_max=0.1, metrics_port=port)
    async with running(worker):
        for i in ids:
            await wait_for(functools.partial(_finished, conn, i))
        body = await asyncio.to_thread(
            lambda: (
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                .read()
                .decode()
            )
        )
    lines = body.splitlines()
    assert 'venturi_jobs_settled_total{kind="o_metrics",outcome="completed"} 3.0' in lines
    # Its one failure was its last allowed (max_failures=1): the job went dead.
    assert 'venturi_jobs_settled_total{kind="o_metrics",outcome="dead"} 1.0' in lines
    assert 'venturi_jobs_claimed_total{kind="o_metrics"} 4.0' in lines
    assert 'venturi_job_run_seconds_count{kind="o_metrics"} 4.0' in lines
    assert 'venturi_job_pickup_seconds_count{kind="o_metrics"} 4.0' in lines
    assert 'venturi_jobs_in_flight{kind="o_metrics"} 0.0' in lines
    assert any(line.startswith("venturi_claims_total ") for line in lines)


async def _finished(conn: Any, job_id: int) -> bool:
    job = await venturi.get_job(conn, job_id)
    return job is not None and job.status in ("completed", "dead")


# --- queue pause per kind --------------------------------------------------------------


async def test_paused_kind_is_not_claimed_until_resumed(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    from venturi import db

    ran: list[str] = []
    resumed_run = asyncio.Event()

    @venturi.task(kind="o_paused")
    async def paused(ctx: Context[Any], carry: Item) -> None:
        ran.append("paused")
        resumed_run.set()

    @venturi.task(kind="o_running")
    async def other(ctx: Context[Any], carry: Item) -> None:
        ran.append("other")

    rows = await db.kinds.kind_pause(
        conn,
        schema="venturi",
        kinds=["o_paused", "o_paused"],
        paused_by="ops:1",
        reason="downstream down",
    )
    assert [(r["kind"], r["paused_by"], r["reason"]) for r in rows] == [
        ("o_paused", "ops:1", "downstream down")
    ]
    held = await paused.enqueue(conn, Item(1))
    free = await other.enqueue(conn, Item(2))
    worker = Worker(None, dsn, [paused, other], concurrency=2, poll_max=30)
    async with running(worker):
        await wait_status(conn, free, "completed")
        await wait_stat(worker, "empty_claims", 1)  # a claim since: the paused kind stays
        job = await venturi.get_job(conn, held)
        assert job is not None and job.status == "pending" and job.attempt == 0
        assert [r["kind"] for r in await db.kinds.kind_paused_list(conn, schema="venturi")] == [
            "o_paused"
        ]
        assert await db.kinds.kind_resume(
            conn, schema="venturi", kinds=["o_paused", "never_paused"]
        ) == ["o_paused"]
        # Well inside poll_max (30 s): only the resume's notification can have woken it.
        await asyncio.wait_for(resumed_run.wait(), 5)
        await wait_status(conn, held, "completed")
    assert ran == ["other", "paused"]
    assert await db.kinds.kind_paused_list(conn, schema="venturi") == []


async def test_shared_rate_limit_holds_across_workers(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started: list[float] = []

    @venturi.task(kind="o_shared_rate", rate=Rate(per_second=10, burst=1, shared=True))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        started.append(time.monotonic())

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(12)])
    # Three workers: with per-worker buckets they would run about 30 jobs a second.
    workers = [Worker(None, dsn, [handler], concurrency=4, poll_max=30) for _ in range(3)]
    async with running(workers[0]), running(workers[1]), running(workers[2]):
        await wait_until(lambda: len(started) == 12, within=30)
    started.sort()
    # Never faster than 10/s across the three (some slack for the clock's resolution); the
    # deadline above bounds it from the other side.
    assert started[-1] - started[0] >= 11 / 11.5
    assert sum(w.stats["claimed"] for w in workers) == 12


@pytest.mark.parametrize(
    "limits",
    [{}, {"global_cap": 20}, {"group_cap": 20}],
    ids=["shared rate", "with a global cap", "grouped"],
)
async def test_a_shared_rate_paces_long_jobs_by_its_tokens_not_by_their_ends(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limits: dict[str, Any]
) -> None:
    # A claim that spent the bucket's last token recorded no wait for the next one: with
    # its jobs still running, the worker slept poll_max, though the next token came a
    # quarter of a second later (one job started in 8 s, where 8 were due).
    started = 0
    release = asyncio.Event()

    @venturi.task(kind="o_rate_long", rate=Rate(per_second=4, burst=1, shared=True), **limits)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        nonlocal started
        started += 1
        await release.wait()

    grouped = "group_cap" in limits
    jobs = [handler.job(Item(i), group=f"t{i % 2}" if grouped else None) for i in range(6)]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [handler], concurrency=8, poll_max=30)
    async with running(worker):
        try:
            await wait_until(lambda: started == 6, within=10)  # 1.25 s of tokens, not 30 s
        finally:
            release.set()


async def test_cancel_request_wins_over_pause_retry_release_and_recovery(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    from venturi import db

    @venturi.task(kind="o_cancel_race")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    ids = await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(4)])
    me, bo = db.Claimant("w:1"), Backoff.fixed(0)
    rows = await claim(conn, me, ["o_cancel_race"], limit=3)
    ghost = await claim(conn, db.Claimant("ghost:9"), ["o_cancel_race"], lease=0.001)
    claimed = {r["id"]: r["attempt"] for r in [*rows, *ghost]}
    assert sorted(claimed) == sorted(ids)
    changes = await admin.cancel_jobs(conn, ids, operator="ops")
    assert all(c.done for c in changes)
    # The request arrives while each handler returns something other than complete.
    a, b, c, d = ids
    assert await db.settle.job_pause_if_owned(
        conn,
        schema="venturi",
        claimant=me,
        job_id=a,
        attempt=claimed[a],
        carry='{"n":9}',
        at=None,
        after=None,
    )
    assert (
        await db.settle.job_fail_if_owned(
            conn,
            schema="venturi",
            claimant=me,
            job_id=b,
            attempt=claimed[b],
            event="failed",
            error="x",
            carry=None,
            delay=0,
            force_dead=False,
        )
        == "cancelled"
    )
    assert await db.settle.job_release_if_owned(
        conn, schema="venturi", claimant=me, job_id=c, attempt=claimed[c], detail="shutdown"
    )
    await expire_claim(conn, d)
    (recovered,) = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=bo
    )
    assert recovered["id"] == d and recovered["status"] == "cancelled"
    for job_id, event in ((a, "paused"), (b, "failed"), (c, "released"), (d, "stale-recovered")):
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "cancelled" and job.finished_at is not None
        trail = events(await venturi.get_journal(conn, job_id))
        assert trail[-1] == "cancelled", (job_id, trail)
        if event != "paused":
            assert event in trail
    # Nothing is left to claim.
    assert (await claim(conn, me, ["o_cancel_race"], limit=10)) == []
