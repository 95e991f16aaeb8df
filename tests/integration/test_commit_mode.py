"""Worker(synchronous_commit=False): the worker's claims and completions commit without
waiting for their WAL flush, and nothing else does (a handler's steps, its own
transaction, the connections of a pool the application shares)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_status
from tests.support.sql import statement as tsql
from venturi import Context
from venturi.errors import ConfigError
from venturi.runtime.worker import Worker


def _declare(prefix: str) -> list[venturi.Task[Any]]:
    @venturi.task(kind=f"{prefix}_plain")
    async def plain(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n * 2)

    async def price(n: int) -> int:
        return n + 1

    @venturi.task(kind=f"{prefix}_step")
    async def stepped(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.step("price", price, carry.n))

    @venturi.task(kind=f"{prefix}_own_tx")
    async def own_tx(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await ctx.complete(conn, carry.n)

    return [plain, stepped, own_tx]


async def _run(
    conn: asyncpg.Connection, pool: asyncpg.Pool, prefix: str, **knobs: Any
) -> dict[str, dict[tuple[str, str | None], set[str]]]:
    """Run one job of each task under a worker with ``knobs``; by task, the commit modes
    the watch recorded for each (table, status) its writes reached."""
    tasks = _declare(prefix)
    ids = {t.kind: await t.enqueue(conn, Item(3)) for t in tasks}
    worker = Worker(None, pool, tasks, poll_max=0.1, **knobs)
    async with running(worker):
        for job_id in ids.values():
            await wait_status(conn, job_id, "completed")
    kind_of = {job_id: kind for kind, job_id in ids.items()}
    seen: dict[str, dict[tuple[str, str | None], set[str]]] = {k: {} for k in ids}
    for r in await conn.fetch(tsql("commit_modes")):
        by = seen[kind_of[r["job_id"]]]
        by.setdefault((r["tbl"], r["status"]), set()).add(r["mode"])
    # The pool's connections keep their own setting: the statement set it for its own
    # transaction only.
    for _ in range(pool.get_size()):
        async with pool.acquire() as c:
            assert await c.fetchval(tsql("setting_show"), "synchronous_commit") == "on"
    await conn.execute("TRUNCATE public.commit_modes")
    return seen


async def test_relaxed_commit_covers_the_claims_and_completions_and_nothing_a_handler_records(
    conn: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    await conn.execute(tsql("commit_modes_watch"))
    assert await conn.fetchval(tsql("setting_show"), "synchronous_commit") == "on"

    relaxed = await _run(conn, pool, "cm_off", synchronous_commit=False)
    claimed, completed = ("jobs", "claimed"), ("jobs", "completed")
    assert relaxed["cm_off_plain"] == {claimed: {"off"}, completed: {"off"}}
    # A step is what a later run replays: it commits as the server's setting says.
    assert relaxed["cm_off_step"] == {
        claimed: {"off"},
        ("steps", None): {"on"},
        completed: {"off"},
    }
    # The handler's own transaction completes the job with its writes: not relaxed.
    assert relaxed["cm_off_own_tx"] == {claimed: {"off"}, completed: {"on"}}

    default = await _run(conn, pool, "cm_on")
    assert default["cm_on_plain"] == {claimed: {"on"}, completed: {"on"}}
    assert default["cm_on_step"] == {claimed: {"on"}, ("steps", None): {"on"}, completed: {"on"}}
    assert default["cm_on_own_tx"] == {claimed: {"on"}, completed: {"on"}}


@pytest.mark.parametrize("bad", ["off", 0, None])
async def test_synchronous_commit_must_be_a_bool(dsn: str, bad: Any) -> None:
    with pytest.raises(ConfigError) as err:
        Worker(None, dsn, [], synchronous_commit=bad)
    assert str(err.value) == f"synchronous_commit must be a bool, got {bad!r}"
