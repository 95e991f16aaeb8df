"""A group's settings written in the caller's transaction (``venturi.set_group``, SPEC 13)
hold up that group alone while the transaction is open: never the worker's other groups,
kinds or jobs."""

from __future__ import annotations

from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_until
from venturi import Context
from venturi.runtime.worker import Worker


async def test_settings_of_a_new_group_in_an_open_transaction_hold_up_that_group_alone(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # set_group inserts the row of a group never seen; a claim that met that insert
    # uncommitted (the group's first job due) waited for the caller's transaction, and
    # the worker's loop with it: no job of any kind started until it ended or the
    # statement timed out (30 s).
    started: list[str] = []

    @venturi.task(kind="g_open", group_cap=1)
    async def grouped(ctx: Context[Any], carry: Item) -> None:
        started.append(ctx.job.group or "")

    @venturi.task(kind="g_open_plain")
    async def plain(ctx: Context[Any], carry: Item) -> None:
        started.append("plain")

    other = await asyncpg.connect(dsn)
    try:
        tx = other.transaction()
        await tx.start()
        await venturi.set_group(other, "g_open", "new", weight=3)
        await grouped.enqueue(conn, Item(1), group="new")
        await grouped.enqueue(conn, Item(2), group="other")
        await plain.enqueue(conn, Item(3))
        worker = Worker(None, dsn, [grouped, plain], concurrency=4, poll_max=60)
        async with running(worker):
            try:
                await wait_until(lambda: {"other", "plain"} <= set(started), within=10)
                assert "new" not in started
            finally:
                await tx.commit()
            # The commit's notification wakes the worker for the group's job.
            await wait_until(lambda: "new" in started, within=10)
    finally:
        await other.close()
