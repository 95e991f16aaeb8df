"""Two keyed ``enqueue_many`` batches over the same keys, given in opposite orders, with
the interleaving forced: another connection holds the key in the middle of both batches
(an uncommitted job of it, or its pending holder's row locked), so that each batch has
taken its first key (or replaced its first holder) when that one lets go. Taken in the
caller's order, each batch then waited for the other's first: deadlock detected."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, wait_for, waits_on_a_lock
from tests.support import sql as tsql
from venturi import Context


@pytest.fixture
def task(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="u_batch")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def _race(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> tuple[list[int], list[int]]:
    """Batches [k1, mid, k2] and [k2, mid, k1] while another transaction holds key mid
    (a job of it uncommitted), which it commits once both batches wait on it."""
    holder, a, b = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        held = holder.transaction()
        await held.start()
        await task.enqueue(holder, Item(0), key="mid")
        first = [task.job(Item(n), key=k) for n, k in enumerate(["k1", "mid", "k2"])]
        racing = asyncio.gather(
            venturi.enqueue_many(a, first), venturi.enqueue_many(b, first[::-1])
        )

        async def both_wait() -> bool:
            return all([await waits_on_a_lock(conn, c.get_server_pid()) for c in (a, b)])

        await wait_for(both_wait)
        await held.commit()
        ids_a, ids_b = await asyncio.wait_for(racing, 15)
    finally:
        for c in (holder, a, b):
            await c.close()
    return ids_a, ids_b


async def test_batches_of_new_keys_in_opposite_orders_do_not_deadlock(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    ids_a, ids_b = await _race(dsn, conn, task)
    # Each batch answers in its caller's order; the two agree on every key's job.
    assert ids_a == ids_b[::-1]
    assert len(set(ids_a)) == 3


async def test_replacing_batches_in_opposite_orders_do_not_deadlock(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    # Holders of k1, mid and k2. Both batches end with a key another transaction has
    # inserted and not committed: they wait there, past every holder's key, so that
    # neither has replaced a holder yet when it commits (an insert of a key waits on an
    # update of its holder). Then both replace; another transaction holds mid's row, so
    # each replaced its first holder when that one lets go.
    # A table of some size, so that the replacing update looks each key up by index, in
    # its batch's order (over a handful of jobs it scans the table, in one order for all).
    await venturi.enqueue_many(conn, [task.job(Item(-1), after=3600)] * 5000)
    ids = await venturi.enqueue_many(conn, [task.job(Item(-1), key=k) for k in ("k1", "mid", "k2")])
    inserter, locker, a, b = [await asyncpg.connect(dsn) for _ in range(4)]

    async def blocked_by(holder: asyncpg.Connection, *waiters: asyncpg.Connection) -> bool:
        query = tsql.statement("backend_blocked_by")
        pid = holder.get_server_pid()
        return all([await conn.fetchval(query, w.get_server_pid(), pid) for w in waiters])

    try:
        inserting, locking = inserter.transaction(), locker.transaction()
        await inserting.start()
        await locking.start()
        await task.enqueue(inserter, Item(0), key="new")
        await locker.fetch(tsql.statement("job_lock_row"), ids[1])
        first = [task.job(Item(n), key=k) for n, k in enumerate(["k1", "mid", "k2"])]
        new = task.job(Item(9), key="new")
        racing = asyncio.gather(
            venturi.enqueue_many(a, [*first, new], on_conflict="replace"),
            venturi.enqueue_many(b, [*first[::-1], new], on_conflict="replace"),
        )
        await wait_for(lambda: blocked_by(inserter, a, b))
        await inserting.commit()

        async def replacing() -> bool:
            waiting = [await waits_on_a_lock(conn, c.get_server_pid()) for c in (a, b)]
            return all(waiting) and (await blocked_by(locker, a) or await blocked_by(locker, b))

        await wait_for(replacing)
        await locking.commit()
        ids_a, ids_b = await asyncio.wait_for(racing, 15)
    finally:
        for c in (inserter, locker, a, b):
            await c.close()
    assert ids_a[:3] == ids == ids_b[2::-1]
    for job_id in ids:
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "pending" and job.carry["n"] >= 0


async def test_a_batch_of_new_keys_returns_ids_in_the_callers_order(
    conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    # Inserted in key order, the ids were drawn in the caller's: they ascend as given.
    ids = await venturi.enqueue_many(
        conn, [task.job(Item(n), key=k) for n, k in enumerate(["z", "m", "a", "z"])]
    )
    assert ids[0] < ids[1] < ids[2] and ids[3] == ids[0]
    jobs = [await venturi.get_job(conn, i) for i in ids[:3]]
    assert [(j.key, j.carry["n"]) for j in jobs if j is not None] == [("z", 0), ("m", 1), ("a", 2)]
