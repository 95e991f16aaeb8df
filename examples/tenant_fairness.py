"""Tenant fairness: per-customer exports, at most two at a time per customer, paying
customers served three times as often as free ones when the queue is busy.

A big customer enqueues a hundred exports at once; a small one enqueues three a moment
later. Without groups the small customer waits behind the hundred. With ``group=`` and
``group_cap=2`` no customer runs more than two exports at once, across every worker, and
the claims go to the customers with work in proportion to their weights: the small
customer's three exports start among the first, not after the hundred. (Here every
customer is held to two at once, so the paying one's weight shows only once the caps
leave slots to share: docs/groups.md.)

Run it against a database with the venturi schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/tenant_fairness.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from dataclasses import dataclass, field

import asyncpg
import msgspec

import venturi
from venturi import Context


class Export(msgspec.Struct):
    """The job's carry: which report to export."""

    report: int


@dataclass
class Exports:
    """The worker's shared state: which customer's export started in what order, and
    how many of each customer ran at once at most."""

    started: list[str] = field(default_factory=list)
    running: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)


@venturi.task(kind="example_export", group_cap=2)
async def export(ctx: Context[Exports], carry: Export) -> None:
    customer = ctx.job.group or "none"
    ctx.state.started.append(customer)
    ctx.state.running[customer] += 1
    ctx.state.peak[customer] = max(ctx.state.peak[customer], ctx.state.running[customer])
    try:
        await asyncio.sleep(0.005)  # the export's work
    finally:
        ctx.state.running[customer] -= 1


async def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    run = uuid.uuid4().hex[:6]  # the example can run again on the same database
    big, small, paying = f"big-{run}", f"small-{run}", f"paying-{run}"
    conn = await asyncpg.connect(dsn)
    try:
        await venturi.enqueue_many(conn, [export.job(Export(i), group=big) for i in range(100)])
        await venturi.enqueue_many(conn, [export.job(Export(i), group=small) for i in range(3)])
        await venturi.enqueue_many(conn, [export.job(Export(i), group=paying) for i in range(30)])
        # A paying customer: three times the share while others have work too.
        await venturi.set_group(conn, "example_export", paying, weight=3)
        print("enqueued: 100 exports of a big customer, 3 of a small one, 30 of a paying one")

        state = Exports()
        worker = venturi.Worker(state, dsn, [export], concurrency=4, poll_max=1.0)
        shutdown = asyncio.Event()
        running = asyncio.create_task(worker.run(shutdown))
        while len(state.started) < 133:
            if running.done():
                running.result()  # the worker stopped early: raise its error
            await asyncio.sleep(0.05)
        shutdown.set()
        await running

        first = state.started[:20]
        print(f"the first 20 exports started: {dict(Counter(first))}")
        last_small = max(i for i, c in enumerate(state.started) if c == small)
        print(f"the small customer's last export started {last_small + 1}th of 133")
        print(f"most exports of one customer at once: {max(state.peak.values())}")
        assert max(state.peak.values()) <= 2
        assert last_small < 20
        print("ok: no customer above its cap, the small one among the first")
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
