"""An operator's bulk call that loses a deadlock (40P01) to another session locking the
same rows in the other order (a worker's batched completion, locking in finish order) is
tried again, a few times with a short backoff, when it runs in its own transaction: the
operator sees the call's results, not a raw "deadlock detected". Inside the caller's own
transaction it is the caller's to retry: raised.

The deadlock is forced, not waited for: the operator's statement queues on row x behind
a holder; the other session, holding y, queues on x behind it; the holder commits, the
operator's statement takes x and waits for y. It is the later waiter and the only one
whose deadlock check runs soon (its session's deadlock_timeout is short, the other's
long): it is the one rolled back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from tests.support.carries import Item, noop_task
from tests.support.waits import wait_blocked
from venturi import admin

Call = Callable[[asyncpg.Connection, list[int]], Awaitable[list[admin.Change]]]

CALLS: dict[str, tuple[str | None, Call]] = {
    "cancel": (None, lambda c, ids: admin.cancel_jobs(c, ids, operator="op")),
    "retry": ("dead", lambda c, ids: admin.retry_jobs(c, ids, operator="op")),
    "delete": (None, lambda c, ids: admin.delete_jobs(c, ids, operator="op")),
    "set-priority": (None, lambda c, ids: admin.set_priority(c, ids, "high", operator="op")),
    "run-now": ("later", lambda c, ids: admin.run_now_jobs(c, ids, operator="op")),
}


async def _deadlocked(dsn: str, conn: asyncpg.Connection, name: str, own: bool) -> Any:
    seed, call = CALLS[name]
    task = noop_task("dl_job")
    x, y = [await task.enqueue(conn, Item(n)) for n in (1, 2)]
    if seed == "dead":
        await conn.execute(
            "UPDATE venturi.jobs SET status = 'dead', finished_at = now() WHERE id = ANY($1)",
            [x, y],
        )
    elif seed == "later":
        await conn.execute(
            "UPDATE venturi.jobs SET visible_at = now() + interval '1 hour' WHERE id = ANY($1)",
            [x, y],
        )
    holder, other, observer = [await asyncpg.connect(dsn) for _ in range(3)]
    await conn.execute("SET deadlock_timeout = '20ms'")
    await other.execute("SET deadlock_timeout = '60s'")
    lock = "SELECT 1 FROM venturi.jobs WHERE id = $1 FOR UPDATE"
    held, others = holder.transaction(), other.transaction()
    try:
        await held.start()
        await others.start()
        await holder.execute(lock, x)
        await other.execute(lock, y)

        async def operator() -> Any:
            if own:
                return await call(conn, [x, y])
            async with conn.transaction():
                return await call(conn, [x, y])

        op = asyncio.ensure_future(operator())
        await wait_blocked(observer, conn)
        blockers = await observer.fetchval("SELECT pg_blocking_pids($1)", conn.get_server_pid())
        assert blockers == [holder.get_server_pid()]  # queued on x, holding nothing
        grab = asyncio.ensure_future(other.execute(lock, x))
        await wait_blocked(observer, other)
        await held.commit()
        await asyncio.wait_for(grab, 15)  # the operator's statement rolled back
        await others.commit()
        return await asyncio.wait_for(asyncio.gather(op, return_exceptions=True), 15)
    finally:
        for c in (holder, other, observer):
            await c.close()


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_bulk_call_that_loses_a_deadlock_is_tried_again(
    dsn: str,
    conn: asyncpg.Connection,
    kinds: list[str],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="venturi.admin")
    [changes] = await _deadlocked(dsn, conn, name, own=True)
    assert not isinstance(changes, BaseException), changes
    assert [c.done for c in changes] == [True, True], [c.message for c in changes]
    assert "deadlock detected" in caplog.text and "trying again" in caplog.text


async def test_a_deadlock_inside_the_caller_s_transaction_is_raised(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    [raised] = await _deadlocked(dsn, conn, "cancel", own=False)
    assert isinstance(raised, asyncpg.exceptions.DeadlockDetectedError)
