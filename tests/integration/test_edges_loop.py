"""The worker loop at its edges: a handler's own CancelledError, recovery while no claim
can be made, a job that becomes due during a slow claim, a handler slow to stop after its
cancellation (its job released at the timeout all the same), a grouped claim that says to
claim again on a worker of kinds with claims of their own, a second signal to
`venturi worker`, and kinds with claims of their own beside another kind's backlog and
beside each other."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    FAST,
    ROOT,
    events,
    running,
    status_of,
    until_cancelled,
    wait_for,
    wait_status,
    wait_until,
    workertasks,
)
from tests.support import Item as N
from tests.support.claims import claimed_in, is_claim
from venturi import Context
from venturi.runtime.worker import Worker

# --- 1. a CancelledError the worker did not issue is a failed execution -----------------


async def _cancelled_elsewhere() -> None:
    """Await something other code cancelled, as a handler does when a library it uses
    cancels a future it shares."""
    fut = asyncio.get_running_loop().create_future()
    fut.cancel()
    await fut


@pytest.mark.parametrize("flavour", ["async", "sync", "timeout"])
async def test_handler_raising_cancelled_error_is_a_failure_not_a_release(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], flavour: str
) -> None:
    runs: list[int] = []
    kind = f"e_cancelled_{flavour}"
    if flavour == "sync":

        @venturi.task(kind=kind, max_failures=2, backoff=FAST)
        def handler(ctx: Context[Any], carry: N) -> None:
            runs.append(ctx.job.attempt)
            raise asyncio.CancelledError()  # in the handler's thread

    else:

        @venturi.task(
            kind=kind,
            max_failures=2,
            backoff=FAST,
            timeout=60 if flavour == "timeout" else None,
        )
        async def handler(ctx: Context[Any], carry: N) -> None:
            runs.append(ctx.job.attempt)
            await _cancelled_elsewhere()

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1)
    async with running(worker):
        await wait_status(conn, job_id, "dead", within=15)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 2 and "CancelledError" in (job.last_error or "")
    trail = events(await venturi.get_journal(conn, job_id))
    assert "released" not in trail
    assert trail.count("failed") == 2 and trail[-1] == "dead"
    assert runs == [1, 2]


async def test_worker_cancellation_inside_a_task_timeout_is_still_a_release(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="e_stubborn_timeout", timeout=120)
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.set()
        await until_cancelled()

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1, shutdown_timeout=0.2)
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    await asyncio.wait_for(started.wait(), 10)
    shutdown.set()
    await asyncio.wait_for(run, 30)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 0
    assert events(await venturi.get_journal(conn, job_id)) == ["enqueued", "claimed", "released"]


# --- 3. recovery goes on whatever the loop does ------------------------------------------


@pytest.mark.parametrize(
    ("concurrency", "cap", "busy_job"),
    [(1, None, True), (3, 1, True), (2, None, False)],
    ids=["slots", "cap", "idle"],
)
async def test_stale_claims_are_recovered_on_the_workers_own_timer(
    dsn: str,
    conn: asyncpg.Connection,
    kinds: list[str],
    concurrency: int,
    cap: int | None,
    busy_job: bool,
) -> None:
    # Every slot busy, its one kind at its cap, or idle: no claim runs (and a claim no
    # longer recovers anyway). poll_max is a minute, so the loop does not wake within the
    # wait below either: the recovery is the worker's own timer, every min(poll_max, 1 s).
    started = asyncio.Event()
    gate = asyncio.Event()

    @venturi.task(kind="e_busy")
    async def busy(ctx: Context[Any], carry: N) -> None:
        started.set()
        await gate.wait()

    @venturi.task(kind="e_ghost")
    async def ghost(ctx: Context[Any], carry: N) -> None:
        return None

    if busy_job:
        await busy.enqueue(conn, N(1))
    worker = Worker(None, dsn, [], concurrency=concurrency, poll_max=60)
    worker.register(busy, cap=cap)
    async with running(worker):
        if busy_job:
            await asyncio.wait_for(started.wait(), 10)
        # Seeded after the worker's last claim: a dead worker's claim, lease expired.
        stale = await ghost.enqueue(conn, N(2))
        await conn.execute(
            "UPDATE venturi.jobs SET status = 'claimed', claimed_by = 'ghost:1', attempt = 1, "
            "claimed_at = now(), "
            "claim_expires_at = now() - interval '1 second' WHERE id = $1",
            stale,
        )
        try:
            await wait_for(lambda: _not_claimed(conn, stale), within=10)
        finally:
            gate.set()
    journal = await venturi.get_journal(conn, stale)
    assert events(journal) == ["enqueued", "claimed", "stale-recovered"]
    assert journal[-1].worker == worker.claimed_by and "ghost:1" in (journal[-1].detail or "")


async def _not_claimed(conn: Any, job_id: int) -> bool:
    return await status_of(conn, job_id) != "claimed"


# --- 5. a job due between the claim and the next-visible lookup -------------------------


class SlowClaim:
    """A real pool whose first empty claim answers only once job ``due`` is visible by
    the database clock: the job becomes due after the claim read now() and before the
    worker looks for the next visible job."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.due: int | None = None
        self.staged = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetch(self, query: str, *args: Any, **kw: Any) -> Any:
        rows = await self._pool.fetch(query, *args, **kw)
        if not self.staged and self.due is not None and is_claim(query) and not claimed_in(rows):
            self.staged = True
            await wait_for(self._visible, within=10)
        return rows

    async def _visible(self) -> bool:
        return bool(
            await self._pool.fetchval(
                "SELECT visible_at <= now() FROM venturi.jobs WHERE id = $1", self.due
            )
        )


async def test_job_due_during_a_slow_claim_is_not_left_for_poll_max(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="e_due")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        slow = SlowClaim(pool)
        # Enqueued before the worker listens, so no notification wakes it.
        slow.due = await handler.enqueue(conn, N(1), after=1.5)
        worker = Worker(None, slow, [handler], poll_max=120)
        async with running(worker):
            await wait_status(conn, slow.due, "completed", within=15)  # not after 120 s
        assert slow.staged  # the first claim did come back empty before the job was due
    finally:
        await pool.close()


@pytest.mark.parametrize(
    "limit",
    [{"global_cap": 10}, {"rate": venturi.Rate(per_second=1000, burst=100, shared=True)}],
    ids=["global cap", "shared rate"],
)
async def test_a_grouped_claim_that_says_again_does_not_sleep_past_a_job_coming_due(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limit: dict[str, Any]
) -> None:
    # A grouped claim that woke a group it could not take from (here: at its cap) says
    # to claim again at once. The loop went by the ordinary claim's kinds alone, none of
    # which is open on a worker whose only kind has a global cap or a shared rate, and
    # slept poll_max: the job coming due in the meantime waited for it (30 s here).
    started: dict[int, float] = {}
    release = asyncio.Event()

    @venturi.task(kind="e_again", group_cap=1, **limit)
    async def handler(ctx: Context[Any], carry: N) -> None:
        started[carry.n] = asyncio.get_running_loop().time()
        if carry.n == 1:
            await release.wait()  # holds group b at its cap

    worker = Worker(None, dsn, [handler], concurrency=4, poll_max=30)
    async with running(worker):
        await handler.enqueue(conn, N(1), group="b")
        await wait_until(lambda: 1 in started, within=10)
        await handler.enqueue(conn, N(2), group="a", after=1.0)
        # stays: the loop must be asleep in its wait for job 2 (no event says so); waiting
        # for its empty claim instead let job 3's notification land mid-iteration, and the
        # test passed without the fix
        await asyncio.sleep(0.2)
        await handler.enqueue(conn, N(3), group="b")  # woken, at its cap: "claim again"
        try:
            await wait_until(lambda: 2 in started, within=10)  # not after 30 s
        finally:
            release.set()
        await wait_until(lambda: 3 in started, within=10)


class SlowOrdinaryClaim:
    """A real pool whose ordinary claims (``job_claim``) answer ``delay`` seconds late."""

    def __init__(self, pool: asyncpg.Pool, delay: float) -> None:
        self._pool = pool
        self.delay = delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetch(self, query: str, *args: Any, **kw: Any) -> Any:
        rows = await self._pool.fetch(query, *args, **kw)
        if is_claim(query):
            await asyncio.sleep(self.delay)  # stays: the slow claim is this test's fault
        return rows


async def test_a_rate_limited_kinds_next_token_due_during_a_slow_claim_is_not_left_for_poll_max(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The kind's shared bucket is empty at its claim, with its next token 0.25 s away;
    # the ordinary claim after it takes 0.4 s. The loop then asked how long to wait for
    # tokens only of waits still to come: that one had passed, its job was visible since
    # it was enqueued (the next-visible lookup looks for scheduled jobs only), and the
    # worker slept poll_max.
    started: list[int] = []

    @venturi.task(kind="e_rated", rate=venturi.Rate(per_second=4, burst=1, shared=True))
    async def rated(ctx: Context[Any], carry: N) -> None:
        started.append(carry.n)

    @venturi.task(kind="e_other")
    async def other(ctx: Context[Any], carry: N) -> None:
        return None

    await venturi.enqueue_many(conn, [rated.job(N(i)) for i in range(4)])
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        worker = Worker(None, SlowOrdinaryClaim(pool, 0.4), [rated, other], poll_max=30)
        async with running(worker):
            await wait_until(lambda: len(started) == 4, within=10)  # not after 30 s each
    finally:
        await pool.close()


# --- 6. shutdown is bounded even when a cancelled handler is slow to stop -----------------


async def test_shutdown_returns_when_a_cancelled_handler_is_slow_to_stop(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()
    gate = asyncio.Event()
    exited = asyncio.Event()

    @venturi.task(kind="e_slow_stop")
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.set()
        try:
            await until_cancelled()
        except asyncio.CancelledError:
            try:
                await gate.wait()  # a clean-up that takes its time
            finally:
                exited.set()
            raise

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1, shutdown_timeout=0.2)
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    await asyncio.wait_for(started.wait(), 10)
    shutdown.set()
    try:
        await asyncio.wait_for(run, 30)
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "pending" and job.failures == 0
        journal = await venturi.get_journal(conn, job_id)
        assert events(journal) == ["enqueued", "claimed", "released"]
        assert "did not stop" in (journal[-1].detail or "")
        assert not exited.is_set()  # returned while the handler was still cleaning up
    finally:
        gate.set()
        await asyncio.wait_for(exited.wait(), 10)


async def test_shutdown_releases_the_job_at_the_timeout_not_after_the_clean_up(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()
    released = asyncio.Event()
    exited = asyncio.Event()
    cleanup: list[str] = []

    @venturi.task(kind="e_long_cleanup")
    async def handler(ctx: Context[Any], carry: N) -> None:
        started.set()
        try:
            await until_cancelled()
        except asyncio.CancelledError:
            # A clean-up that lasts until the test has seen the job released, or gives
            # up after 4 s: a worker that waited for it (a fixed 5 s grace) released the
            # job only after it gave up.
            try:
                await asyncio.wait_for(released.wait(), 4)
                cleanup.append("the job was released first")
            except TimeoutError:
                cleanup.append("gave up waiting for the release")
            raise
        finally:
            exited.set()

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(None, dsn, [handler], poll_max=0.1, shutdown_timeout=0.5)
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    await asyncio.wait_for(started.wait(), 10)
    shutdown.set()
    await wait_status(conn, job_id, "pending", within=30)
    released.set()
    await asyncio.wait_for(run, 30)  # run() returns
    await asyncio.wait_for(exited.wait(), 10)
    assert cleanup == ["the job was released first"]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 0
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "released"]
    assert "shutdown_timeout elapsed" in (journal[-1].detail or "")


# --- 8. a second signal releases the running jobs before the process exits ---------------


async def test_second_sigterm_releases_running_jobs_and_says_so(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    job_id = await workertasks.block.enqueue(conn, workertasks.Item(1))
    env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "worker",
        "tests.support.workertasks",
        "--shutdown-timeout",
        "600",
        "--poll-max",
        "0.5",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[str] = []

    async def line_with(text: str) -> None:
        assert proc.stderr is not None
        while not any(text in seen for seen in lines):
            raw = await proc.stderr.readline()
            if not raw:
                raise AssertionError(f"stderr ended without {text!r}: {lines}")
            lines.append(raw.decode().rstrip("\n"))

    try:
        await wait_for(lambda: _ran(tmp_path), within=30)  # the handler is running
        proc.send_signal(signal.SIGTERM)
        # Signals of one kind sent back to back can merge into one: wait for the first.
        await asyncio.wait_for(line_with("a second signal"), 15)
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(line_with("released"), 30)
        rest = await asyncio.wait_for(proc.stderr.read(), 30)
        lines += rest.decode().splitlines()
        code = await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 130, lines
    said = [line for line in lines if line.startswith("venturi: ") and "released" in line]
    assert len(said) == 1 and "1 running job" in said[0], lines
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 0
    assert events(await venturi.get_journal(conn, job_id))[-1] == "released"


def _ran_sync(runs: Path) -> bool:
    return any(f.read_text() for f in runs.glob("runs-*.txt"))


async def _ran(runs: Path) -> bool:
    return await asyncio.to_thread(_ran_sync, runs)


@pytest.mark.parametrize(
    "limits",
    [{"global_cap": 8}, {"rate": venturi.Rate(per_second=100_000, burst=1_000, shared=True)}],
    ids=["global cap", "shared rate"],
)
async def test_a_kind_with_a_claim_of_its_own_is_not_starved_by_another_kinds_backlog(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limits: dict[str, Any]
) -> None:
    # A kind with a global cap or a shared rate is claimed in a statement of its own.
    # It went after the ordinary claim in every iteration, which a backlog of another
    # kind filled: the limited kind's older jobs ran 0 times in the worker's first 1,500
    # runs. The two take turns going first now.
    order: list[str] = []

    @venturi.task(kind="e_limited", **limits)
    async def limited(ctx: Context[Any], carry: N) -> None:
        order.append("limited")
        await asyncio.sleep(0.002)  # stays: the backlog must outlast the limited jobs

    @venturi.task(kind="e_backlog")
    async def backlog(ctx: Context[Any], carry: N) -> None:
        order.append("backlog")
        await asyncio.sleep(0.002)  # stays: the backlog must outlast the limited jobs

    await venturi.enqueue_many(conn, [limited.job(N(i)) for i in range(300)])
    await venturi.enqueue_many(conn, [backlog.job(N(i)) for i in range(2000)])
    async with running(Worker(None, dsn, [limited, backlog], concurrency=4, poll_max=30)):
        await wait_until(lambda: order.count("limited") == 300, within=60)
        ran = order.count("backlog")
    # All 300 ran while the backlog lasted (about every other slot: by run 600 or so).
    assert ran < 2000, ran
    assert order.index("limited") < 100, order.index("limited")


@pytest.mark.parametrize(
    ("limits", "group"),
    [
        ({"group_cap": 100}, "tenant"),
        ({"rate": venturi.Rate(per_second=100_000, burst=1_000, shared=True)}, None),
        ({"global_cap": 100}, None),
    ],
    ids=["grouped", "shared rate", "global cap"],
)
async def test_kinds_with_claims_of_their_own_take_turns_going_first(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limits: dict[str, Any], group: str | None
) -> None:
    # Each such kind is claimed in a statement of its own, one after another into the
    # same free slots. In a fixed order (by name) the first kind's backlog took every
    # slot: the second ran 0 times in the first 1,000 runs.
    order: list[str] = []

    async def work(ctx: Context[Any], carry: N) -> None:
        order.append(ctx.job.kind)
        await asyncio.sleep(0.002)  # stays: the backlogs must last past the first runs

    first = venturi.task(kind="e_first", **limits)(work)
    second = venturi.task(kind="e_second", **limits)(work)
    jobs = [t.job(N(i), group=group) for t in (first, second) for i in range(1000)]
    await venturi.enqueue_many(conn, jobs)
    async with running(Worker(None, dsn, [first, second], concurrency=4, poll_max=30)):
        await wait_until(lambda: len(order) >= 1000, within=60)
    assert order[:1000].count("e_second") >= 300, order[:1000].count("e_second")
