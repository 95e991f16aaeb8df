"""The races a replay model invites (issue 23, item 1), each pinned by a test that fails
without its fix: a worker killed after a step, a spawn that must not happen twice, the
lost wake-up of a signal or of the last children, a timer and a signal due together, a
cancel racing a child's completion, a parent whose lease expired while its children ran.

The database-level races drive the real statements on two connections and hold one
transaction open to force each interleaving, instead of hoping a timing produces it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    ROOT,
    Item,
    expire_claim,
    running,
    wait_blocked,
    wait_for,
    wait_status,
    workflowtasks,
)
from venturi import Context, admin, db
from venturi.runtime.worker import Worker
from venturi.workflow import children
from venturi.workflow.run import WorkflowRun

S = "venturi"


async def _claim(conn: asyncpg.Connection, job_id: int) -> tuple[db.Claimant, int]:
    """Claim ``job_id`` as a worker run would: a token and the next attempt."""
    me = db.Claimant("test", uuid.uuid4())
    attempt = await conn.fetchval(
        "UPDATE venturi.jobs SET status = 'claimed', claim_token = $2, attempt = attempt + 1, "
        "claimed_at = now(), claimed_by = 'test', claim_expires_at = now() + interval '1 hour' "
        "WHERE id = $1 RETURNING attempt",
        job_id,
        me.token,
    )
    return me, int(attempt)


async def _complete(conn: asyncpg.Connection, job_id: int, me: db.Claimant, attempt: int) -> None:
    done = await db.settle.job_complete_many_if_owned(
        conn, schema=S, claimant=me, ids=[job_id], attempts=[attempt], results=[None]
    )
    assert done == {job_id}


async def _woken(conn: asyncpg.Connection, job_id: int) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM venturi.journal WHERE job_id = $1 AND event = 'woken'", job_id
        )
    )


async def _status(conn: asyncpg.Connection, job_id: int) -> str:
    return str(await conn.fetchval("SELECT status FROM venturi.jobs WHERE id = $1", job_id))


@venturi.task(kind="race_node")
async def node(ctx: Context[Any], carry: Item) -> None:
    """A kind for rows the tests drive by hand (no worker runs it)."""


# --- a worker killed after a step ----------------------------------------------------


async def test_a_step_recorded_before_a_sigkill_never_runs_again(
    dsn: str, conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VENTURI_DSN", dsn)  # where the steps' own writes go
    await conn.execute("CREATE TABLE effects (job_id bigint, what text)")
    job_id = await workflowtasks.workflow.enqueue(conn, Item(1))
    env = dict(os.environ)
    victim = subprocess.Popen(  # noqa: ASYNC220 (started once, not awaited on)
        [sys.executable, "-m", "venturi", "worker", "tests.support.workflowtasks",
         "--poll-max", "0.2"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:

        async def both_recorded() -> bool:
            n = await conn.fetchval("SELECT count(*) FROM venturi.steps WHERE job_id = $1", job_id)
            return bool(n == 2)

        await wait_for(both_recorded, within=60)
    finally:
        victim.kill()  # SIGKILL: the run ends where it stands
        await asyncio.to_thread(victim.communicate, timeout=30)
    await expire_claim(conn, job_id)
    async with running(Worker(None, dsn, [workflowtasks.workflow], poll_max=0.2)):
        await wait_status(conn, job_id, "completed", within=30)
    rows = await conn.fetch("SELECT what, count(*) AS n FROM effects GROUP BY what")
    # The plain step ran once (recorded before the kill); the transactional one's write
    # exists once.
    assert {r["what"]: r["n"] for r in rows} == {"step": 1, "tx": 1}
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.attempt == 2


# --- a spawn never happens twice -----------------------------------------------------


async def test_two_runs_spawning_the_same_child_at_once_spawn_it_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent = await node.enqueue(conn, Item(0))
    pools = [await asyncpg.create_pool(dsn, min_size=1, max_size=2) for _ in range(2)]
    try:
        # Two runs of one job (a lost lease): each has loaded no record of "kid" yet.
        runs = [WorkflowRun(p, S, parent) for p in pools]
        for run in runs:
            await run.load()
        try:
            kids = await asyncio.gather(
                *(children.spawn(r, "kid", node, Item(i), None, None) for i, r in enumerate(runs))
            )
            # Both write their spawn at once (the runs' next statement, or their end).
            await asyncio.gather(*(r.spawns.flush() for r in runs))
        finally:
            for run in runs:
                await run.release()  # the handler's end gives its connection back
    finally:
        for p in pools:
            await p.close()
    # The run whose record lost carries the winner's child.
    assert kids[0].job_id == kids[1].job_id
    assert (
        await conn.fetchval("SELECT count(*) FROM venturi.jobs WHERE parent_id = $1", parent) == 1
    )
    assert (
        await conn.fetchval(
            "SELECT (value #>> '{}')::bigint FROM venturi.steps WHERE job_id = $1 AND name = 'kid'",
            parent,
        )
        == kids[0].job_id
    )


async def test_a_crash_before_a_spawn_commits_leaves_neither_child_nor_record(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent = await node.enqueue(conn, Item(0))
    tx = conn.transaction()
    await tx.start()
    await db.workflow.child_spawn(
        conn, schema=S, parent_id=parent, name="kid", spec=node.job(Item(1)), traceparent=None
    )
    await tx.rollback()  # the process died before the commit
    assert (
        await conn.fetchval("SELECT count(*) FROM venturi.jobs WHERE parent_id = $1", parent) == 0
    )
    assert await conn.fetchval("SELECT count(*) FROM venturi.steps WHERE job_id = $1", parent) == 0
    again = await db.workflow.child_spawn(
        conn, schema=S, parent_id=parent, name="kid", spec=node.job(Item(1)), traceparent=None
    )
    replay = await db.workflow.child_spawn(
        conn, schema=S, parent_id=parent, name="kid", spec=node.job(Item(1)), traceparent=None
    )
    assert (again["inserted"], again["spawned"]) == (True, True)
    assert (replay["id"], replay["inserted"], replay["spawned"]) == (again["id"], False, False)
    assert (
        await conn.fetchval("SELECT count(*) FROM venturi.jobs WHERE parent_id = $1", parent) == 1
    )


# --- lost wake-ups -------------------------------------------------------------------


async def test_a_signal_sent_while_the_run_decides_to_wait_is_never_lost(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Order 1: the run reads "no signal", the signal commits, then the wait settles.
    job_id = await node.enqueue(conn, Item(1))
    me, attempt = await _claim(conn, job_id)
    seen, payload = await db.workflow.signal_get(conn, schema=S, job_id=job_id, name="go")
    assert payload is None
    assert await venturi.signal(conn, job_id, "go", 1)
    status = await db.workflow.job_wait_if_owned(
        conn, schema=S, claimant=me, job_id=job_id, attempt=attempt, seen=seen,
        wake_at=None, signal="go", wait_for=None, detail="signal 'go'",
    )  # fmt: skip
    assert status == "pending"

    # Order 2: the wait settles in a transaction still open; the signal waits for its row
    # lock and then finds the job waiting for it.
    job_id = await node.enqueue(conn, Item(2))
    me, attempt = await _claim(conn, job_id)
    seen, _ = await db.workflow.signal_get(conn, schema=S, job_id=job_id, name="go")
    other = await asyncpg.connect(dsn)
    try:
        tx = conn.transaction()
        await tx.start()
        status = await db.workflow.job_wait_if_owned(
            conn, schema=S, claimant=me, job_id=job_id, attempt=attempt, seen=seen,
            wake_at=None, signal="go", wait_for=None, detail="signal 'go'",
        )  # fmt: skip
        assert status == "waiting"
        sending = asyncio.ensure_future(venturi.signal(other, job_id, "go", 2))
        await wait_blocked(conn, other)
        await tx.commit()
        assert await sending
    finally:
        await other.close()
    assert await _status(conn, job_id) == "pending"
    assert await _woken(conn, job_id) == 1


async def _parent_waiting_on_two(
    conn: asyncpg.Connection,
) -> tuple[int, list[tuple[int, db.Claimant, int]]]:
    parent = await node.enqueue(conn, Item(0))
    me, attempt = await _claim(conn, parent)
    kids = []
    for i in range(2):
        row = await db.workflow.child_spawn(
            conn, schema=S, parent_id=parent, name=f"kid-{i}", spec=node.job(Item(i)),
            traceparent=None,
        )  # fmt: skip
        kid_me, kid_attempt = await _claim(conn, int(row["id"]))
        kids.append((int(row["id"]), kid_me, kid_attempt))
    seen, _ = await db.workflow.child_list(conn, schema=S, job_id=parent, ids=[k[0] for k in kids])
    status = await db.workflow.job_wait_if_owned(
        conn, schema=S, claimant=me, job_id=parent, attempt=attempt, seen=seen, wake_at=None,
        signal=None, wait_for=[k[0] for k in kids], detail="2 children",
    )  # fmt: skip
    assert status == "waiting"
    return parent, kids


async def test_the_last_two_children_finishing_at_once_wake_the_parent_exactly_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, kids = await _parent_waiting_on_two(conn)
    a, b = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        # Child 1 settles in a transaction held open; child 2 settles meanwhile on another
        # connection (it waits for the parent's row); then both commit.
        tx = a.transaction()
        await tx.start()
        await _complete(a, *kids[0])
        second = asyncio.ensure_future(_complete(b, *kids[1]))
        await wait_blocked(conn, b)
        await tx.commit()
        await second
    finally:
        await a.close()
        await b.close()
    assert await _status(conn, parent) == "pending"
    assert await _woken(conn, parent) == 1


async def test_children_settled_together_in_one_statement_wake_the_parent_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    parent, kids = await _parent_waiting_on_two(conn)
    me = kids[0][1]
    await conn.execute(
        "UPDATE venturi.jobs SET claim_token = $1 WHERE id = $2", me.token, kids[1][0]
    )
    done = await db.settle.job_complete_many_if_owned(
        conn, schema=S, claimant=me, ids=[k[0] for k in kids], attempts=[k[2] for k in kids],
        results=[None, None],
    )  # fmt: skip
    assert done == {kids[0][0], kids[1][0]}
    assert await _status(conn, parent) == "pending"
    assert await _woken(conn, parent) == 1


async def test_a_timer_and_a_signal_due_together_wake_it_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    for timer_first in (True, False):
        job_id = await node.enqueue(conn, Item(1))
        me, attempt = await _claim(conn, job_id)
        seen, _ = await db.workflow.signal_get(conn, schema=S, job_id=job_id, name="go")
        status = await db.workflow.job_wait_if_owned(
            conn, schema=S, claimant=me, job_id=job_id, attempt=attempt, seen=seen,
            wake_at=await conn.fetchval("SELECT now() + interval '1 hour'"), signal="go",
            wait_for=None, detail="signal 'go' with a timeout",
        )  # fmt: skip
        assert status == "waiting"
        await conn.execute("UPDATE venturi.jobs SET wake_at = now() WHERE id = $1", job_id)
        other = await asyncpg.connect(dsn)
        try:
            tx = conn.transaction()
            await tx.start()
            if timer_first:
                assert await db.workflow.job_wake_due(conn, schema=S, kinds=["race_node"]) == 1
                sending = asyncio.ensure_future(venturi.signal(other, job_id, "go", 1))
                await wait_blocked(conn, other)
                await tx.commit()
                assert await sending  # recorded, but the job was already pending
            else:
                assert await venturi.signal(conn, job_id, "go", 1)
                # The timer sweep skips the row the signal holds.
                assert await db.workflow.job_wake_due(other, schema=S, kinds=["race_node"]) == 0
                await tx.commit()
                assert await db.workflow.job_wake_due(other, schema=S, kinds=["race_node"]) == 0
        finally:
            await other.close()
        assert await _status(conn, job_id) == "pending"
        assert await _woken(conn, job_id) == 1


async def test_a_cancel_racing_a_childs_completion(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    for cancel_first in (False, True):
        parent, kids = await _parent_waiting_on_two(conn)
        await _complete(conn, *kids[1])  # one child already done
        a, b = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            tx = a.transaction()
            await tx.start()
            if cancel_first:
                await admin.cancel_jobs(a, [parent], operator="op")
                completing = asyncio.ensure_future(_complete(b, *kids[0]))
                await wait_blocked(conn, b)
                await tx.commit()
                await completing
                assert await _status(conn, kids[0][0]) == "completed"
            else:
                await _complete(a, *kids[0])  # wakes the parent (uncommitted)
                cancelling = asyncio.ensure_future(admin.cancel_jobs(b, [parent], operator="op"))
                await wait_blocked(conn, b)
                await tx.commit()
                [change] = await cancelling
                assert change.done, change.message
        finally:
            await a.close()
            await b.close()
        # Either way: the parent ends cancelled, never woken into a run after it.
        assert await _status(conn, parent) == "cancelled"
        assert await _status(conn, kids[0][0]) == "completed"


# --- a parent whose lease expired while its children ran -----------------------------


async def test_a_parent_whose_lease_expired_while_its_children_ran(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    release = asyncio.Event()

    @venturi.task(kind="race_child", result=int)
    async def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n + 100)

    @venturi.task(kind="race_parent", backoff=venturi.Backoff.fixed(0.01))
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kid = await ctx.spawn("kid", child, Item(1))
        if ctx.job.attempt == 1:
            await release.wait()  # hangs past its lease while the child runs
        [got] = await ctx.gather(kid)
        return venturi.complete(got)

    job_id = await parent.enqueue(conn, Item(0))
    worker = Worker(None, dsn, [parent, child], poll_max=0.2, concurrency=3)
    async with running(worker):

        async def child_done() -> bool:
            n = await conn.fetchval(
                "SELECT count(*) FROM venturi.jobs WHERE parent_id = $1 AND status = 'completed'",
                job_id,
            )
            return bool(n == 1)

        await wait_for(child_done)
        await expire_claim(conn, job_id)  # its worker is presumed dead
        await wait_status(conn, job_id, "completed")
        release.set()  # the first run wakes up: its claim is gone, it settles nothing
        await wait_for(lambda: _true_after(worker))
    assert await venturi.get_result(conn, job_id) == 101
    assert (
        await conn.fetchval("SELECT count(*) FROM venturi.jobs WHERE parent_id = $1", job_id) == 1
    )
    assert worker.stats["ownership_lost"] >= 1


async def _true_after(worker: Worker[Any]) -> bool:
    return worker.jobs_held() == 0


async def test_a_run_that_lost_its_claim_runs_no_further_step_function(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The long soak's case: a run stalled (its connections black-holed) past its lease,
    # its job was recovered and run to its end elsewhere, and the stalled run, once
    # free, ran a step function whose record the newer run had made (its steps were read
    # before that record existed).
    go_on = asyncio.Event()
    calls: list[int] = []

    async def after(attempt: int) -> int:
        calls.append(attempt)
        return attempt

    @venturi.task(kind="race_zombie", lease=60)
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("before", after, 0)
        if ctx.job.attempt == 1:
            await go_on.wait()  # stalls while its claim is lost
        return venturi.complete(await ctx.step("after", after, ctx.job.attempt))

    job_id = await flow.enqueue(conn, Item(0))
    worker = Worker(None, dsn, [flow], poll_max=0.2, heartbeat=0.1, concurrency=2)
    async with running(worker):
        await wait_for(lambda: _has_step(conn, job_id, "before"))
        await expire_claim(conn, job_id)  # recovered: the worker's own recovery runs it again
        await wait_status(conn, job_id, "completed")
        await wait_for(lambda: _claims_lost(worker))
        go_on.set()  # the first run goes on, without its claim
        await wait_for(lambda: _true_after(worker))
    assert calls == [0, 2]  # "before" once, "after" once, by the run that holds the claim
    assert await venturi.get_result(conn, job_id) == 2


async def _has_step(conn: asyncpg.Connection, job_id: int, name: str) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT count(*) FROM venturi.steps WHERE job_id = $1 AND name = $2", job_id, name
        )
    )


async def _claims_lost(worker: Worker[Any]) -> bool:
    return worker.stats["claims_lost"] >= 1
