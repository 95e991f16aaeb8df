"""A worker's loop settles the runs that wait in one statement (job_wait_many_if_owned):
each job as job_wait_if_owned would settle it alone: waiting, or pending again when an
event came since its run looked, or untouched when its claim is lost."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_status
from venturi import Context, db
from venturi.runtime.worker import Worker

S = "venturi"


@venturi.task(kind="waits_node")
async def node(ctx: Context[Any], carry: Item) -> None:
    """Rows the test drives by hand."""


async def _claim(conn: asyncpg.Connection, job_id: int, me: db.Claimant) -> int:
    return int(
        await conn.fetchval(
            "UPDATE venturi.jobs SET status = 'claimed', claim_token = $2, "
            "attempt = attempt + 1, claimed_at = now(), claimed_by = 'test', "
            "claim_expires_at = now() + interval '1 hour' WHERE id = $1 RETURNING attempt",
            job_id,
            me.token,
        )
    )


async def test_each_wait_of_a_batch_is_settled_as_it_would_be_alone(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    me = db.Claimant("test", uuid.uuid4())
    ids = [await node.enqueue(conn, Item(i)) for i in range(5)]
    attempts = [await _claim(conn, i, me) for i in ids]
    kid = await node.enqueue(conn, Item(9))
    # ids[1]: a signal came after its run looked (wake_seq moved on): pending again.
    await conn.execute("UPDATE venturi.jobs SET wake_seq = 1 WHERE id = $1", ids[1])
    # ids[3]: its claim was lost (another run holds it now): untouched.
    await conn.execute(
        "UPDATE venturi.jobs SET claim_token = $2 WHERE id = $1", ids[3], uuid.uuid4()
    )
    later = datetime.now(UTC) + timedelta(hours=1)
    past = datetime.now(UTC) - timedelta(seconds=1)
    waits = [
        db.workflow.Wait(ids[0], attempts[0], 0, None, "go", None, "signal 'go'"),
        db.workflow.Wait(ids[1], attempts[1], 0, None, "go", None, "signal 'go'"),
        db.workflow.Wait(ids[2], attempts[2], 0, None, None, [kid], "1 children"),
        db.workflow.Wait(ids[3], attempts[3], 0, later, None, None, "timer"),
        db.workflow.Wait(ids[4], attempts[4], 0, past, None, None, "timer, due"),
    ]
    settled = await db.workflow.job_wait_many_if_owned(conn, schema=S, claimant=me, waits=waits)
    assert settled == {ids[0]: "waiting", ids[1]: "pending", ids[2]: "waiting", ids[4]: "pending"}
    rows = {
        r["id"]: r
        for r in await conn.fetch(
            "SELECT id, status, wait_signal, wait_for, wait_count, claim_token "
            "FROM venturi.jobs WHERE id = ANY($1)",
            ids,
        )
    }
    assert rows[ids[0]]["wait_signal"] == "go" and rows[ids[0]]["claim_token"] is None
    assert (rows[ids[2]]["wait_for"], rows[ids[2]]["wait_count"]) == ([kid], 1)
    assert rows[ids[3]]["status"] == "claimed"
    events = await conn.fetch(
        "SELECT job_id, event, detail FROM venturi.journal WHERE job_id = ANY($1) "
        "AND event IN ('waiting', 'woken') ORDER BY job_id, id",
        ids,
    )
    assert [(e["job_id"], e["event"]) for e in events] == [
        (ids[0], "waiting"),
        (ids[1], "waiting"),
        (ids[1], "woken"),
        (ids[2], "waiting"),
        (ids[4], "waiting"),
        (ids[4], "woken"),
    ]
    assert events[0]["detail"] == "signal 'go'"
    # The child's end wakes the parent that waits for it, as after a wait of its own.
    kid_me = db.Claimant("test", uuid.uuid4())
    kid_attempt = await _claim(conn, kid, kid_me)
    await conn.execute(
        "UPDATE venturi.jobs SET parent_id = $1, linked = true WHERE id = $2", ids[2], kid
    )
    done = await db.settle.job_complete_many_if_owned(
        conn, schema=S, claimant=kid_me, ids=[kid], attempts=[kid_attempt], results=[None]
    )
    assert done == {kid}
    assert await conn.fetchval("SELECT status FROM venturi.jobs WHERE id = $1", ids[2]) == "pending"


async def test_parents_that_wait_together_are_all_woken_by_their_children(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="waits_kid", result=int)
    async def kid(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="waits_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn(f"k{i}", kid, Item(carry.n + i)) for i in range(3)]
        return venturi.complete(sum(await ctx.gather(*kids)))

    ids = [await parent.enqueue(conn, Item(10 * i)) for i in range(12)]
    async with running(Worker(None, dsn, [parent, kid], poll_max=5, concurrency=12)):
        for i, job_id in enumerate(ids):
            await wait_status(conn, job_id, "completed")
            assert await venturi.get_result(conn, job_id) == 3 * 10 * i + 3
    waited = await conn.fetchval(
        "SELECT count(*) FROM venturi.journal WHERE job_id = ANY($1) AND event = 'waiting'", ids
    )
    assert waited >= 1
