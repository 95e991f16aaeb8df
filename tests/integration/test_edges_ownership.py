"""Edges of enqueue, recovery and claim ownership: a keyed batch racing a key's holder,
recovery backing off with the task's own Backoff, several workers recovering at once,
and claims owned by a worker run's token rather than by its identity."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from tests.support import (
    ROOT,
    events,
    expire_claim,
    expire_claims,
    running,
    venturi_cli_async,
    wait_for,
    wait_status,
    wait_until,
    waits_on_a_lock,
)
from tests.support import Item as N
from tests.support.claims import LoseClaimAnswer, claim
from venturi import Backoff, Context, admin, db
from venturi.runtime.instruments import Instruments
from venturi.runtime.recovery import RECOVER_BATCH, Recovery
from venturi.runtime.worker import Worker


async def _count(conn: asyncpg.Connection, kind: str) -> int:
    counts = await db.reads.job_counts(conn, schema="venturi")
    return sum(r["jobs"] for r in counts if r["kind"] == kind)


def _due_in(job: venturi.JobInfo | None) -> float:
    assert job is not None
    return (job.visible_at - datetime.now(UTC)).total_seconds()


# --- item 2: keyed enqueue_many racing the key's holder ---------------------------------


async def test_keyed_batch_racing_a_holder_gets_its_id_in_one_transaction(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="e_race")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    holder_conn = await asyncpg.connect(dsn)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        b_pid = await pool.fetchval("SELECT pg_backend_pid()")
        holding = holder_conn.transaction()
        await holding.start()
        holder = await handler.enqueue(holder_conn, N(0), key="K")
        batch = [handler.job(N(1)), handler.job(N(2), key="K"), handler.job(N(3))]
        call = asyncio.create_task(venturi.enqueue_many(pool, batch))
        await wait_for(lambda: waits_on_a_lock(conn, b_pid))
        await holding.commit()
        ids = await asyncio.wait_for(call, 15)
        assert ids[1] == holder, "the key's holder's id, as Task.enqueue returns it"
        assert len(set(ids)) == 3 and ids[0] < ids[2]
        assert await _count(conn, "e_race") == 3  # the holder and the two unkeyed jobs
    finally:
        await pool.close()
        await holder_conn.close()


async def test_keyed_batch_on_a_connection_joins_the_callers_transaction(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="e_race_tx")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    holder_conn = await asyncpg.connect(dsn)
    caller = await asyncpg.connect(dsn)
    try:
        caller_pid = caller.get_server_pid()
        holding = holder_conn.transaction()
        await holding.start()
        holder = await handler.enqueue(holder_conn, N(0), key="K")
        callers = caller.transaction()
        await callers.start()
        batch = [handler.job(N(1)), handler.job(N(2), key="K")]
        call = asyncio.create_task(venturi.enqueue_many(caller, batch))
        await wait_for(lambda: waits_on_a_lock(conn, caller_pid))
        await holding.commit()
        ids = await asyncio.wait_for(call, 15)
        assert ids[1] == holder
        assert caller.is_in_transaction()  # still the caller's to commit or roll back
        await callers.rollback()
        # The caller's rollback takes the whole batch with it; the holder's job stays.
        assert await _count(conn, "e_race_tx") == 1
        assert await venturi.get_job(conn, ids[0]) is None
    finally:
        await caller.close()
        await holder_conn.close()


# --- item 4: recovery backs off with the task's own Backoff -----------------------------


async def test_recover_stale_uses_the_tasks_own_backoff(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="r_own", backoff=Backoff.fixed(600))
    async def own(ctx: Context[Any], carry: N) -> None:
        return None

    @venturi.task(kind="r_default")
    async def default(ctx: Context[Any], carry: N) -> None:
        return None

    a = await own.enqueue(conn, N(1))
    b = await default.enqueue(conn, N(1))
    ghost = db.Claimant("ghost:1")
    await db.claims.job_claim(
        conn,
        schema="venturi",
        claimant=ghost,
        kinds=["r_own", "r_default"],
        leases=[60.0] * 2,
        floor=0,
        limit=2,
    )
    await expire_claims(conn)
    # The sweep knows no task: the row's stored backoff decides; its own only for b.
    recovered = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=Backoff.fixed(30)
    )
    assert sorted(r["id"] for r in recovered) == [a, b]
    assert 590 < _due_in(await venturi.get_job(conn, a)) <= 600
    assert 20 < _due_in(await venturi.get_job(conn, b)) <= 30


async def test_claims_recovery_uses_the_tasks_own_backoff_with_jitter(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="r_jitter", backoff=Backoff.exponential(400, factor=3, cap=10_000))
    async def own(ctx: Context[Any], carry: N) -> None:
        return None

    ids = [await own.enqueue(conn, N(i)) for i in range(20)]
    ghost = db.Claimant("ghost:1")
    await claim(conn, ghost, ["r_jitter"], limit=20)
    await expire_claims(conn)
    # Another worker's recovery recovers them, with its default fixed(0).
    await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="other:2", backoff=Backoff.fixed(0)
    )
    dues = [_due_in(await venturi.get_job(conn, i)) for i in ids]
    # First failure: 400 s, half-jittered into [200, 400].
    assert all(190 < d <= 400 for d in dues), dues
    assert len({round(d) for d in dues}) > 1, "jittered, not one instant for all"


async def test_recover_command_uses_the_tasks_own_backoff(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="r_cli", backoff=Backoff.fixed(900))
    async def own(ctx: Context[Any], carry: N) -> None:
        return None

    job_id = await own.enqueue(conn, N(1))
    ghost = db.Claimant("ghost:1")
    await claim(conn, ghost, ["r_cli"])
    await expire_claims(conn)
    out = await venturi_cli_async("recover", "--dsn", dsn)
    assert out.returncode == 0, out.stderr
    assert "recovered 1 expired claim(s)" in out.stdout
    assert 890 < _due_in(await venturi.get_job(conn, job_id)) <= 900


async def test_workers_recovering_at_once_recover_each_expired_claim_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Every worker runs the recovery on its own timer, with no leader: three at once over
    # more expired claims than one statement takes (RECOVER_BATCH), each in batches.
    @venturi.task(kind="r_many")
    async def own(ctx: Context[Any], carry: N) -> None:
        return None

    n = RECOVER_BATCH + 500
    ids = await venturi.enqueue_many(conn, [own.job(N(i)) for i in range(n)])
    assert len(await claim(conn, db.Claimant("ghost:1"), ["r_many"], limit=n)) == n
    await expire_claims(conn)
    conns = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        recoveries = [
            Recovery("venturi", f"w:{k}", Backoff.fixed(0), Instruments(False), every=1.0)
            for k in range(3)
        ]
        counts = await asyncio.gather(
            *(r.recover(c) for r, c in zip(recoveries, conns, strict=True))
        )
    finally:
        for c in conns:
            await c.close()
    assert sum(counts) == n
    assert sum(r.stats["recovered"] for r in recoveries) == n
    rows = await conn.fetch(
        "SELECT job_id, count(*) AS n FROM venturi.journal "
        "WHERE event = 'stale-recovered' GROUP BY job_id"
    )
    assert sorted(r["job_id"] for r in rows) == sorted(ids) and {r["n"] for r in rows} == {1}
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM venturi.jobs WHERE status = 'pending' AND failures = 1"
        )
        == n
    )


async def test_worker_backoff_is_the_default_for_tasks_that_declare_none(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="r_fails")
    async def fails(ctx: Context[Any], carry: N) -> None:
        raise RuntimeError("boom")

    @venturi.task(kind="r_fails_own", backoff=Backoff.fixed(0.01))
    async def fails_own(ctx: Context[Any], carry: N) -> None:
        raise RuntimeError("boom")

    a = await fails.enqueue(conn, N(1))
    b = await fails_own.enqueue(conn, N(1))
    worker = Worker(None, dsn, [fails, fails_own], backoff=Backoff.fixed(300), poll_max=0.1)

    async def failed_once(job_id: int) -> bool:
        job = await venturi.get_job(conn, job_id)
        return job is not None and job.failures >= 1 and job.status == "pending"

    async with running(worker):
        await wait_for(lambda: failed_once(a))
        await wait_for(lambda: failed_once(b))
    assert 290 < _due_in(await venturi.get_job(conn, a)) <= 300  # the worker's default
    assert _due_in(await venturi.get_job(conn, b)) < 5  # its own, not the worker's


# --- item 7: ownership is a worker run's token, not its identity ----------------------


async def test_a_lost_claim_answer_releases_only_this_runs_jobs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    long_runs: list[int] = []

    @venturi.task(kind="o_long", lease=3600)
    async def long(ctx: Context[Any], carry: N) -> None:
        long_runs.append(ctx.job.attempt)
        await gate.wait()

    @venturi.task(kind="o_quick", lease=3600)
    async def quick(ctx: Context[Any], carry: N) -> None:
        return None

    live = await long.enqueue(conn, N(1))
    holder = Worker(None, dsn, [long], poll_max=0.1, claimed_by="same:1")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        async with running(holder):
            await wait_until(lambda: long_runs == [1])
            lossy = LoseClaimAnswer(pool)
            lossy.armed = True
            orphan = await quick.enqueue(conn, N(2))
            loser = Worker(None, lossy, [quick], poll_max=0.1, claimed_by="same:1")
            async with running(loser):
                # Its own orphan is released at once (not after the hour-long lease) ...
                await wait_status(conn, orphan, "completed", within=10)
            assert loser.stats["orphans_released"] == 1
            # ... and the other worker's live job, same identity, is left alone.
            job = await venturi.get_job(conn, live)
            assert job is not None and job.status == "claimed" and job.attempt == 1
            gate.set()
            await wait_status(conn, live, "completed")
        assert long_runs == [1]
        assert events(await venturi.get_journal(conn, live)) == ["enqueued", "claimed", "completed"]
        trail = events(await venturi.get_journal(conn, orphan))
        assert trail == ["enqueued", "claimed", "released", "claimed", "completed"]
    finally:
        await pool.close()


# Found by the chaos soak with groups (all --seed 37): the heartbeat keyed a worker's runs
# by job id, so a zombie's lost claim stopped the same job's new run in that worker.
async def test_a_zombie_s_lost_claim_does_not_stop_the_same_job_s_new_run_in_that_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    runs: dict[int, Context[Any]] = {}
    started = {1: asyncio.Event(), 2: asyncio.Event()}
    release = asyncio.Event()

    @venturi.task(kind="own_zombie", backoff=Backoff.fixed(0.05))
    async def handler(ctx: Context[Any], carry: N) -> None:
        runs[ctx.job.attempt] = ctx
        started[ctx.job.attempt].set()
        # Both runs hold until the test has looked; the first is deaf to the stop it is
        # asked (a zombie).
        await release.wait()

    job_id = await handler.enqueue(conn, N(1))
    worker = Worker(
        None, dsn, [handler], concurrency=2, poll_max=0.2, heartbeat=0.1, claimed_by="zombie"
    )
    async with running(worker):
        await asyncio.wait_for(started[1].wait(), 15)
        # The first run outlives its lease (seeded, not slept for): recovered, and claimed
        # again by this same worker (the only one) while the first run still runs.
        await expire_claim(conn, job_id)
        await asyncio.wait_for(started[2].wait(), 15)
        # Two pushes of the worker's row after the new run started: the heartbeat's tick
        # between them asked about both claims, the zombie's and the new one.
        for _ in range(2):
            await _next_beat(conn, "zombie")
        stats = dict(worker.stats)
        asked_to_stop = {attempt: ctx.is_cancelled() for attempt, ctx in runs.items()}
        release.set()
        await wait_status(conn, job_id, "completed")
    assert stats["recovered"] == 1 and stats["claims_lost"] == 1
    # The zombie's lost claim asks it to stop; the new claim is owned: nothing may ask
    # its run to stop.
    assert asked_to_stop == {1: True, 2: False}


async def _next_beat(conn: asyncpg.Connection, name: str) -> None:
    """Wait until worker ``name``'s heartbeat pushes its row forward once more."""

    async def beat_at() -> datetime:
        [w] = await admin.list_workers(conn, match=name)
        assert w.heartbeat_at is not None
        return w.heartbeat_at

    before = await beat_at()

    async def later() -> bool:
        return await beat_at() > before

    await wait_for(later)


async def test_same_identity_claimants_never_touch_each_others_claims(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="o_pair")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    first, second = await venturi.enqueue_many(conn, [handler.job(N(1)), handler.job(N(2))])
    a, b = db.Claimant("same:1"), db.Claimant("same:1")
    (ra,) = await claim(conn, a, ["o_pair"])
    (rb,) = await claim(conn, b, ["o_pair"])
    assert (ra["id"], rb["id"]) == (first, second)
    # b's orphan release, heartbeat and settlements leave a's claim alone.
    assert [
        r["id"]
        for r in await db.settle.job_release_orphans_if_owned(
            conn, schema="venturi", claimant=b, running=[]
        )
    ] == [second]
    (beat,) = await db.settle.job_heartbeat_if_owned(
        conn, schema="venturi", claimant=b, ids=[first], attempts=[1], leases=[60.0]
    )
    assert not beat["owned"] and not beat["renewed"]
    assert (
        await db.settle.job_complete_many_if_owned(
            conn, schema="venturi", claimant=b, ids=[first], attempts=[1], results=[None]
        )
        == set()
    )
    assert not await db.settle.job_release_if_owned(
        conn, schema="venturi", claimant=b, job_id=first, attempt=1, detail="x"
    )
    assert not await db.settle.job_cancel_if_owned(
        conn, schema="venturi", claimant=b, job_id=first, attempt=1, detail="x"
    )
    assert (
        await db.settle.job_fail_if_owned(
            conn,
            schema="venturi",
            claimant=b,
            job_id=first,
            attempt=1,
            event="failed",
            error="x",
            carry=None,
            delay=0,
            force_dead=False,
        )
        is None
    )
    job = await venturi.get_job(conn, first)
    assert job is not None and job.status == "claimed" and job.claimed_by == "same:1"
    # a still owns it, and the journal names the identity, not the token.
    assert await db.settle.job_fail_if_owned(
        conn,
        schema="venturi",
        claimant=a,
        job_id=first,
        attempt=1,
        event="failed",
        error="x",
        carry=None,
        delay=0,
        force_dead=False,
    )
    assert [e.worker for e in await venturi.get_journal(conn, first)][-2:] == ["same:1"] * 2


_HOLDER = """
import asyncio
import sys

import venturi
from tests.support import workertasks


async def main() -> None:
    worker = venturi.Worker(None, sys.argv[1], [workertasks.block], poll_max=0.1,
                            claimed_by="shared:1")
    await worker.run(asyncio.Event())

asyncio.run(main())
"""


async def test_another_process_with_the_same_identity_keeps_its_live_job(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, kinds: list[str]
) -> None:
    from tests.support import workertasks

    @venturi.task(kind="o_mine", lease=3600)
    async def mine(ctx: Context[Any], carry: N) -> None:
        return None

    live = await workertasks.block.enqueue(conn, workertasks.Item(1))
    env = {**os.environ, "VENTURI_TEST_RUNS_DIR": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDER,
        dsn,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:

        async def claimed() -> bool:
            job = await venturi.get_job(conn, live)
            return job is not None and job.status == "claimed"

        await wait_for(claimed, within=30)
        lossy = LoseClaimAnswer(pool)
        lossy.armed = True
        orphan = await mine.enqueue(conn, N(2))
        here = Worker(None, lossy, [mine], poll_max=0.1, claimed_by="shared:1")
        async with running(here):
            await wait_status(conn, orphan, "completed", within=10)
        assert here.stats["orphans_released"] == 1
        job = await venturi.get_job(conn, live)
        assert job is not None and job.status == "claimed" and job.attempt == 1
        assert "released" not in events(await venturi.get_journal(conn, live))
    finally:
        await pool.close()
        proc.kill()
        await asyncio.wait_for(proc.wait(), 30)
