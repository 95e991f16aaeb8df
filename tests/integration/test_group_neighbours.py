"""A worker with grouped kinds serves its other kinds, and its grouped kinds' own limits,
as a worker without groups does (SPEC 13: "Jobs without a group behave exactly as before
and pay nothing for this section"): no free slot waits for a rest or a recheck while a
job is claimable."""

from __future__ import annotations

from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_until
from venturi import Context
from venturi.runtime.worker import Worker


async def test_a_capped_kind_beside_a_grouped_kind_takes_each_freed_place(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The ordinary claim that found pc at its cap came back short, and the loop took that
    # for "nothing to claim" and rested the claim; pc's runs ended, the grouped claim
    # carried their completions, and the idle lookup cannot see a job visible since its
    # creation: two of pc's jobs a poll_max (60 s here).
    started = 0

    @venturi.task(kind="n_grouped", group_cap=1)
    async def grouped(ctx: Context[Any], carry: Item) -> None: ...

    @venturi.task(kind="n_capped", cap=2)
    async def capped(ctx: Context[Any], carry: Item) -> None:
        nonlocal started
        started += 1

    await venturi.enqueue_many(conn, [capped.job(Item(i)) for i in range(40)])
    async with running(Worker(None, dsn, [grouped, capped], concurrency=4, poll_max=60)):
        await wait_until(lambda: started == 40, within=30)


async def test_a_grouped_kind_at_this_workers_cap_takes_the_places_its_runs_free(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The runs whose completions ride the grouped claim still counted against the kind's
    # cap, so the kind was left out of that claim; the loop then idled, and its lookup
    # (a group holds a due job) looked again in half a second: two jobs each half second.
    started = 0

    @venturi.task(kind="n_grouped_capped", cap=2, group_cap=10)
    async def grouped(ctx: Context[Any], carry: Item) -> None:
        nonlocal started
        started += 1

    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="acme") for i in range(400)])
    async with running(Worker(None, dsn, [grouped], concurrency=8, poll_max=60)):
        await wait_until(lambda: started == 400, within=30)
