"""Uniqueness beyond "while unfinished": ``on_conflict`` (existing, raise, replace) on
``enqueue`` and ``enqueue_many``, and ``@venturi.task(unique_for=...)``, also with
enqueues and claims interleaving inside open transactions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, wait_for, waits_on_a_lock
from tests.support.claims import claim
from venturi import ConfigError, Context, Priority, db

SCHEMA = "venturi"
W = db.Claimant("w:1")


async def _jobs(conn: asyncpg.Connection, kind: str) -> int:
    counts = await db.reads.job_counts(conn, schema=SCHEMA)
    return sum(r["jobs"] for r in counts if r["kind"] == kind)


async def _complete(conn: asyncpg.Connection, row: Any) -> None:
    done = await db.settle.job_complete_many_if_owned(
        conn, schema=SCHEMA, claimant=W, ids=[row["id"]], attempts=[row["attempt"]], results=[None]
    )
    assert done == {row["id"]}


@pytest.fixture
def task(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="u_plain")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def test_raise_names_the_holder_and_writes_nothing(
    conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    holder = await task.enqueue(conn, Item(1), key="K")
    with pytest.raises(venturi.DuplicateJob) as caught:
        await task.enqueue(conn, Item(2), key="K", on_conflict="raise")
    assert caught.value.job_id == holder
    assert str(caught.value) == f"key 'K' of kind 'u_plain' is held by job {holder}"
    # A whole batch goes with it, the rows before the held key included.
    with pytest.raises(venturi.DuplicateJob) as batch:
        await venturi.enqueue_many(
            conn,
            [task.job(Item(3), key="fresh"), task.job(Item(4)), task.job(Item(5), key="K")],
            on_conflict="raise",
        )
    assert batch.value.job_id == holder
    assert await _jobs(conn, "u_plain") == 1
    # A key free of holders inserts as usual; one given twice in a batch is refused.
    assert await task.enqueue(conn, Item(6), key="other", on_conflict="raise") != holder
    with pytest.raises(ConfigError, match="appears more than once"):
        await venturi.enqueue_many(
            conn, [task.job(Item(7), key="x"), task.job(Item(8), key="x")], on_conflict="raise"
        )


async def test_replace_updates_a_pending_holder_and_leaves_a_claimed_one(
    conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    holder = await task.enqueue(conn, Item(1), key="K", after=3600)
    same = await task.enqueue(conn, Item(2), key="K", priority=Priority.HIGH, on_conflict="replace")
    assert same == holder
    job = await venturi.get_job(conn, holder)
    assert job is not None and job.carry == {"n": 2} and job.priority is Priority.HIGH
    assert job.visible_at <= datetime.now(UTC)  # the new visible time: now
    [row] = await claim(conn, W, ["u_plain"])
    assert row["id"] == holder
    again = await task.enqueue(conn, Item(3), key="K", on_conflict="replace", after=60)
    assert again == holder
    job = await venturi.get_job(conn, holder)
    assert job is not None and job.status == "claimed" and job.carry == {"n": 2}
    assert await _jobs(conn, "u_plain") == 1


async def test_replace_in_a_batch_the_last_row_of_a_key_wins(
    conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    holder = await task.enqueue(conn, Item(0), key="A")
    ids = await venturi.enqueue_many(
        conn,
        [
            task.job(Item(1), key="A"),
            task.job(Item(2), key="B"),
            task.job(Item(3)),
            task.job(Item(4), key="B", priority=Priority.LOW),
            task.job(Item(5), key="A"),
        ],
        on_conflict="replace",
    )
    assert ids[0] == ids[4] == holder
    assert ids[1] == ids[3] and len({holder, ids[1], ids[2]}) == 3
    a = await venturi.get_job(conn, holder)
    b = await venturi.get_job(conn, ids[1])
    assert a is not None and a.carry == {"n": 5}
    assert b is not None and b.carry == {"n": 4} and b.priority is Priority.LOW
    assert await _jobs(conn, "u_plain") == 3


async def test_replace_racing_a_claim_that_locked_the_holder_first_leaves_it_alone(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    holder = await task.enqueue(conn, Item(1), key="K")
    claimer = await asyncpg.connect(dsn)
    enqueuer = await asyncpg.connect(dsn)
    try:
        tx = claimer.transaction()
        await tx.start()
        [row] = await claim(claimer, W, ["u_plain"])
        assert row["id"] == holder
        racing = asyncio.create_task(
            task.enqueue(enqueuer, Item(2), key="K", on_conflict="replace")
        )
        await wait_for(lambda: waits_on_a_lock(conn, enqueuer.get_server_pid()))
        await tx.commit()
        assert await asyncio.wait_for(racing, 15) == holder
    finally:
        await claimer.close()
        await enqueuer.close()
    job = await venturi.get_job(conn, holder)
    assert job is not None and job.status == "claimed" and job.carry == {"n": 1}
    assert await _jobs(conn, "u_plain") == 1


async def test_a_claim_racing_an_open_replace_skips_the_row_then_runs_the_new_carry(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    holder = await task.enqueue(conn, Item(1), key="K")
    enqueuer = await asyncpg.connect(dsn)
    try:
        tx = enqueuer.transaction()
        await tx.start()
        assert await task.enqueue(enqueuer, Item(2), key="K", on_conflict="replace") == holder
        assert await claim(conn, W, ["u_plain"]) == []  # locked by the replace: skipped
        await tx.commit()
    finally:
        await enqueuer.close()
    [row] = await claim(conn, W, ["u_plain"])
    assert row["id"] == holder and row["carry"] == '{"n": 2}'


async def test_unique_for_holds_a_key_after_its_job_finished(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="u_window", unique_for=timedelta(hours=1))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    first = await handler.enqueue(conn, Item(1), key="K")
    [row] = await claim(conn, W, ["u_window"])
    await _complete(conn, row)
    assert await handler.enqueue(conn, Item(2), key="K") == first
    assert await handler.enqueue(conn, Item(2), key="K", on_conflict="replace") == first
    [batch] = await venturi.enqueue_many(conn, [handler.job(Item(3), key="K")])
    assert batch == first
    with pytest.raises(venturi.DuplicateJob) as caught:
        await handler.enqueue(conn, Item(4), key="K", on_conflict="raise")
    assert caught.value.job_id == first
    job = await venturi.get_job(conn, first)
    assert job is not None and job.status == "completed" and job.carry == {"n": 1}
    # Other keys are free; and once the window has passed (seeded), the key is too.
    assert await handler.enqueue(conn, Item(5), key="L") != first
    await conn.execute(
        "UPDATE venturi.jobs SET finished_at = now() - interval '61 minutes' WHERE id = $1",
        first,
    )
    fresh = await handler.enqueue(conn, Item(6), key="K")
    assert fresh != first
    [again] = await venturi.enqueue_many(conn, [handler.job(Item(7), key="K")])
    assert again == fresh  # the new unfinished holder


async def test_unique_for_also_counts_dead_and_cancelled_holders(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="u_dead", unique_for=60)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    first = await handler.enqueue(conn, Item(1), key="K")
    [change] = await venturi.admin.cancel_jobs(conn, [first])
    assert change.done
    assert await handler.enqueue(conn, Item(2), key="K") == first


async def test_concurrent_enqueues_inside_open_transactions_make_one_job(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="u_race", unique_for=60)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    holder_conn = await asyncpg.connect(dsn)
    caller = await asyncpg.connect(dsn)
    try:
        holding = holder_conn.transaction()
        await holding.start()
        holder = await handler.enqueue(holder_conn, Item(0), key="K")
        callers = caller.transaction()
        await callers.start()
        racing = asyncio.create_task(
            handler.enqueue(caller, Item(1), key="K", on_conflict="replace")
        )
        await wait_for(lambda: waits_on_a_lock(conn, caller.get_server_pid()))
        await holding.commit()
        assert await asyncio.wait_for(racing, 15) == holder
        await callers.commit()
        # The racer also raises once the holder is visible, inside its open transaction.
        callers = caller.transaction()
        await callers.start()
        with pytest.raises(venturi.DuplicateJob):
            await handler.enqueue(caller, Item(2), key="K", on_conflict="raise")
        await callers.rollback()
    finally:
        await caller.close()
        await holder_conn.close()
    job = await venturi.get_job(conn, holder)
    assert job is not None and job.carry == {"n": 1}  # replaced after the holder committed
    assert await _jobs(conn, "u_race") == 1


async def test_on_conflict_and_unique_for_are_checked(
    conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    with pytest.raises(ConfigError, match="on_conflict must be one of existing, raise, replace"):
        await task.enqueue(conn, Item(1), key="K", on_conflict="ignore")
    with pytest.raises(ConfigError, match="on_conflict must be one of"):
        await venturi.enqueue_many(conn, [task.job(Item(1))], on_conflict=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unique_for must be positive"):

        @venturi.task(kind="u_bad", unique_for=0)
        async def bad(ctx: Context[Any], carry: Item) -> None:
            return None


async def test_unique_for_holds_a_key_whose_holder_completes_while_the_enqueue_waits(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="u_finishing", unique_for=3600)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    holder = await handler.enqueue(conn, Item(1), key="K")
    [row] = await claim(conn, W, ["u_finishing"])
    completer = await asyncpg.connect(dsn)
    enqueuer = await asyncpg.connect(dsn)
    try:
        for enqueue in (
            lambda: handler.enqueue(enqueuer, Item(2), key="K"),
            lambda: venturi.enqueue_many(enqueuer, [handler.job(Item(3), key="K")]),
        ):
            tx = completer.transaction()
            await tx.start()
            if row is not None:
                await _complete(completer, row)  # the completion, not yet committed
                row = None
            else:
                # Second round: the holder is finished already; an update of the row
                # in an open transaction stands in for a completion still in flight.
                await completer.execute(
                    "UPDATE venturi.jobs SET status = 'claimed', finished_at = NULL WHERE id = $1",
                    holder,
                )
                await tx.commit()
                tx = completer.transaction()
                await tx.start()
                await completer.execute(
                    "UPDATE venturi.jobs SET status = 'completed', finished_at = now() "
                    "WHERE id = $1",
                    holder,
                )
            racing = asyncio.create_task(enqueue())
            await wait_for(lambda: waits_on_a_lock(conn, enqueuer.get_server_pid()))
            await tx.commit()
            got = await asyncio.wait_for(racing, 15)
            assert got == holder or got == [holder]
    finally:
        await completer.close()
        await enqueuer.close()
    assert await _jobs(conn, "u_finishing") == 1
