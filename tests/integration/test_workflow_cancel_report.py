"""What an operator's cancel reports of its cascade (SPEC 12): ``venturi jobs cancel`` of
a waiting parent or a Workflow node counts, and names, the children and dependents the
cascade cancelled or asked to stop, besides the ids given."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, venturi_cli_async, wait_status
from venturi import Context, admin
from venturi.runtime.worker import Worker


async def test_cancelling_a_waiting_parent_reports_its_cascade(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="wcr_slow")
    async def slow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        started.set()
        await ctx.cancelled()
        return venturi.pause(carry)

    @venturi.task(kind="wcr_idle")
    async def idle(ctx: Context[Any], carry: Item) -> None:
        raise AssertionError("must not run")

    @venturi.task(kind="wcr_parent")
    async def parent(ctx: Context[Any], carry: Item) -> None:
        a = await ctx.spawn("running", slow, Item(1))
        b = await ctx.spawn("queued", idle, Item(2))
        c = await ctx.spawn("queued too", idle, Item(3))
        await ctx.gather(a, b, c)

    job_id = await parent.enqueue(conn, Item(1))
    # idle is not registered: its children stay pending.
    worker = Worker(None, dsn, [parent, slow], poll_max=600, concurrency=2, heartbeat=0.1)
    async with running(worker):
        await wait_status(conn, job_id, "waiting")
        await asyncio.wait_for(started.wait(), 15)
        kids = await conn.fetch(
            "SELECT id, kind FROM venturi.jobs WHERE parent_id = $1 ORDER BY id", job_id
        )
        queued = [r["id"] for r in kids if r["kind"] == "wcr_idle"]
        [claimed] = [r["id"] for r in kids if r["kind"] == "wcr_slow"]
        out = await venturi_cli_async("jobs", "cancel", str(job_id), dsn=dsn)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[-1] == (
            "cancelled 3 (2 of them by the cascade to children and dependents), "
            "asked 1 running to stop (1 by the cascade), refused 0"
        )
        assert lines[0] == (
            f"job {job_id} (wcr_parent): waiting -> cancelled; with it, cancelled 2 "
            f"children or dependents (jobs {queued[0]}, {queued[1]}) and asked 1 running "
            f"to stop (job {claimed})"
        )
        await wait_status(conn, claimed, "cancelled")
    assert {r["status"] for r in await conn.fetch("SELECT status FROM venturi.jobs")} == {
        "cancelled"
    }


async def test_cancelling_a_workflow_node_reports_its_dependents(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="wcr_node")
    async def node(ctx: Context[Any], carry: Item) -> None: ...

    wf = venturi.Workflow()
    a = wf.add("a", node.job(Item(1)))
    b = wf.add("b", node.job(Item(2)), after=[a])
    wf.add("c", node.job(Item(3)), after=[b])
    other = await node.enqueue(conn, Item(4))
    ids = await wf.enqueue(conn)
    changes = await admin.cancel_jobs(conn, [ids["a"], other], operator="op")
    cascade = [(c.id, getattr(c, "cascade_cancelled", None)) for c in changes]
    assert cascade == [(other, []), (ids["a"], [ids["b"], ids["c"]])]
    out = await venturi_cli_async("jobs", "cancel", str(ids["b"]), "--json", dsn=dsn)
    [again] = json.loads(out.stdout)
    assert again["done"] is False and again["cascade_cancelled"] == []
