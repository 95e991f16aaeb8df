"""A group's settings written in the caller's transaction (``venturi.set_group``, SPEC 13)
hold up that group alone while the transaction is open: never the worker's other groups,
kinds or jobs."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

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


@pytest.mark.parametrize("seen", [True, False], ids=["a group seen", "a group never seen"])
async def test_a_held_group_with_a_thousand_wake_ups_holds_up_no_other_group(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], seen: bool
) -> None:
    # Each enqueue of its own writes its group's wake-up. A claim reads the kind's 1,000
    # oldest due wake-ups and passes over a group whose row (or, never seen, its advisory
    # lock) a caller's open transaction holds, leaving its wake-ups: once the held group
    # had 1,000 of them, every claim read those alone, and no group that was not ready
    # already (a new tenant's first job) started until the transaction ended.
    started: list[str] = []

    @venturi.task(kind="g_many_wakes")
    async def grouped(ctx: Context[Any], carry: Item) -> None:
        started.append(ctx.job.group or "")

    if seen:
        await venturi.set_group(conn, "g_many_wakes", "held", weight=1)
    for i in range(1001):
        await grouped.enqueue(conn, Item(i), group="held")
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") >= 1001
    other = await asyncpg.connect(dsn)
    try:
        tx = other.transaction()
        await tx.start()
        await venturi.set_group(other, "g_many_wakes", "held", weight=2)
        await grouped.enqueue(conn, Item(-1), group="victim")
        worker = Worker(None, dsn, [grouped], concurrency=4, poll_max=1)
        async with running(worker):
            try:
                await wait_until(lambda: "victim" in started, within=10)
                assert "held" not in started
            finally:
                await tx.commit()
            await wait_until(lambda: started.count("held") == 1001, within=60)
    finally:
        await other.close()
    # The wake-ups the claims passed over were folded into one a group, and applied once
    # the group was free.
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 0
