"""An operator's retry of a ``venturi.Workflow``'s nodes (SPEC 12: a job runs only once
every job it comes after has completed): a retried node whose dependency is retried with
it, or still unfinished, goes back to waiting and its dependency's completion releases
it; a node whose dependency stays dead or cancelled is refused, saying which."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, venturi_cli_async, wait_status
from venturi import Context, admin, db
from venturi.runtime.worker import Worker


class Graph:
    """a -> b, and c after a and b; a dies while ``broken`` holds, or b does."""

    def __init__(self, prefix: str) -> None:
        self.broken = {"a"}
        self.order: list[str] = []
        self.seen: list[Any] = []

        @venturi.task(kind=f"{prefix}_a", max_failures=1, result=int)
        async def a(ctx: Context[Any], carry: Item) -> venturi.Outcome:
            return self._run("a", carry.n)

        @venturi.task(kind=f"{prefix}_b", max_failures=1, result=int)
        async def b(ctx: Context[Any], carry: Item) -> venturi.Outcome:
            self.seen.append(await ctx.result_of("a"))
            return self._run("b", carry.n)

        @venturi.task(kind=f"{prefix}_c", max_failures=1, result=int)
        async def c(ctx: Context[Any], carry: Item) -> venturi.Outcome:
            self.seen.append((await ctx.result_of("a"), await ctx.result_of("b")))
            return self._run("c", carry.n)

        self.tasks = [a, b, c]

    def _run(self, name: str, n: int) -> venturi.Outcome:
        self.order.append(name)
        if name in self.broken:
            return venturi.dead(f"{name} broken")
        return venturi.complete(n)

    async def enqueue(self, conn: asyncpg.Connection) -> dict[str, int]:
        a, b, c = self.tasks
        wf = venturi.Workflow()
        na = wf.add("a", a.job(Item(1)))
        nb = wf.add("b", b.job(Item(2)), after=[na])
        wf.add("c", c.job(Item(3)), after=[na, nb])
        return await wf.enqueue(conn)

    def worker(self, dsn: str) -> Worker[Any]:
        return Worker(None, dsn, self.tasks, poll_max=600, concurrency=3)


async def _statuses(conn: asyncpg.Connection, ids: dict[str, int]) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT id, status FROM venturi.all_jobs WHERE id = ANY($1)", list(ids.values())
    )
    by_id = {r["id"]: r["status"] for r in rows}
    return {name: by_id[i] for name, i in ids.items()}


async def test_retried_dependents_wait_for_their_retried_dependency(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    g = Graph("wfr")
    ids = await g.enqueue(conn)
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "cancelled")
    assert await _statuses(conn, ids) == {"a": "dead", "b": "cancelled", "c": "cancelled"}
    g.broken.clear()
    # The docs' advice, from the command line: retry the three together.
    out = await venturi_cli_async(
        "jobs", "retry", *(str(i) for i in ids.values()), "--json", dsn=dsn
    )
    assert out.returncode == 0, out.stderr
    changes = {c["id"]: c for c in json.loads(out.stdout)}
    assert [(changes[ids[n]]["done"], changes[ids[n]]["now"]) for n in "abc"] == [
        (True, "pending"),
        (True, "waiting"),
        (True, "waiting"),
    ]
    assert changes[ids["b"]]["message"] == (
        f"job {ids['b']} (wfr_b): cancelled -> waiting for job {ids['a']} (it comes after it)"
    )
    assert await _statuses(conn, ids) == {"a": "pending", "b": "waiting", "c": "waiting"}
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "completed")

    assert g.order == ["a", "a", "b", "c"]
    assert g.seen == [1, (1, 2)]


async def test_a_node_whose_dependency_stays_dead_is_refused_and_left_as_it_is(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    g = Graph("wfs")
    ids = await g.enqueue(conn)
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "cancelled")
    changes = await admin.retry_jobs(conn, [ids["b"], ids["c"]], operator="op")
    assert [(c.id, c.done) for c in changes] == [(ids["b"], False), (ids["c"], False)]
    assert changes[0].message == (
        f"job {ids['b']} (wfs_b) cannot be retried: it comes after job {ids['a']}, which "
        f"is dead and stays so; retry job {ids['a']} with it"
    )
    assert changes[1].message == (
        f"job {ids['c']} (wfs_c) cannot be retried: it comes after job {ids['a']}, which "
        f"is dead and stays so; retry job {ids['a']} with it"
    )
    assert await _statuses(conn, ids) == {"a": "dead", "b": "cancelled", "c": "cancelled"}
    retried = [e for e in await venturi.get_journal(conn, ids["b"]) if e.event == "retried"]
    assert retried == []


async def test_a_node_after_a_completed_one_runs_and_its_own_dependents_wait(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    g = Graph("wft")
    g.broken = {"b"}
    ids = await g.enqueue(conn)
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "cancelled")
    assert await _statuses(conn, ids) == {"a": "completed", "b": "dead", "c": "cancelled"}
    # Moved to the history first: a retry brings them back from there the same way.
    assert await db.operations.job_history_move(conn, schema="venturi", after=0, batch=10) == 3
    g.broken.clear()
    changes = await admin.retry_jobs(conn, [ids["c"], ids["b"]], operator="op")
    assert [(c.id, c.now) for c in changes] == [(ids["b"], "pending"), (ids["c"], "waiting")]
    row = await conn.fetchrow(
        "SELECT wait_for, wait_count, wake_at FROM venturi.jobs WHERE id = $1", ids["c"]
    )
    assert (row["wait_for"], row["wait_count"], row["wake_at"]) == ([ids["b"]], 1, None)
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "completed")
    assert g.order == ["a", "b", "b", "c"]


async def test_a_node_retried_while_its_dependency_runs_waits_for_it(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    g = Graph("wfu")
    ids = await g.enqueue(conn)
    async with running(g.worker(dsn)):
        await wait_status(conn, ids["c"], "cancelled")
    g.broken.clear()
    [a] = await admin.retry_jobs(conn, [ids["a"]], operator="op")
    assert a.now == "pending"
    # a pending again (not yet run): b and c retried after it wait for it.
    changes = await admin.retry_jobs(conn, [ids["b"], ids["c"]], operator="op")
    assert [c.now for c in changes] == ["waiting", "waiting"]
    async with running(g.worker(dsn)):
        await asyncio.wait_for(wait_status(conn, ids["c"], "completed"), 30)
    assert g.order == ["a", "a", "b", "c"]
