"""Real workflows for the dashboard's tests, run by ``venturi.testing.drain`` (a real
worker in this process): a three-node ``venturi.Workflow``, a parent whose spawned
children finished, a parent waiting for one of its two children, a job asleep on a
timer, a job waiting for a signal (its kind and a step name hostile HTML), and a
Workflow node waiting for its dependency, which waits for a signal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import venturi
import venturi.admin
import venturi.testing
from tests.support.carries import Item
from venturi import Context

HOSTILE_KIND = "wf<b>approve</b>&\"'"
HOSTILE_STEP = "<script>alert('step')</script>"


@dataclass(frozen=True)
class Flows:
    """The ids of the workflows ``run_flows`` ran, as they stand after it."""

    extract: int  # the Workflow's first node, completed
    transform: int
    load: int
    order: int  # completed, after its three children
    ships: list[int]
    gatherer: int  # waiting for one of its two children
    gathered: list[int]  # [completed child, child waiting for a signal]
    sleeper: int  # waiting on its day-long timer
    approver: int  # waiting for the signal "approval" (kind and a step hostile)
    gate: int  # a Workflow's first node, waiting for the signal "go"
    after_gate: int  # the node after it, waiting for its dependency


def _tasks() -> dict[str, Any]:
    @venturi.task(kind="wfw_extract", result=int)
    async def extract(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfw_transform", result=int)
    async def transform(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.result_of("extract") * 2)

    @venturi.task(kind="wfw_load")
    async def load(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.result_of("extract") + await ctx.result_of("transform"))

    @venturi.task(kind="wfw_ship", result=int)
    async def ship(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        if carry.n < 0:  # a parcel that waits for its courier
            await ctx.wait_for_signal("courier", str)
        return venturi.complete(carry.n)

    async def charge(total: int) -> int:
        return total

    @venturi.task(kind="wfw_order")
    async def order(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("charge", charge, carry.n)
        parcels = [await ctx.spawn(f"ship-{i}", ship, Item(i)) for i in range(3)]
        return venturi.complete(sum(await ctx.gather(*parcels)))

    @venturi.task(kind="wfw_gather")
    async def gather(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn("fast", ship, Item(1)), await ctx.spawn("slow", ship, Item(-1))]
        return venturi.complete(sum(await ctx.gather(*kids)))

    @venturi.task(kind="wfw_sleep")
    async def sleeper(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("prepare", charge, 1)
        await ctx.sleep("cool-off", timedelta(days=1))
        return venturi.complete(1)

    @venturi.task(kind=HOSTILE_KIND)
    async def approver(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step(HOSTILE_STEP, charge, 2)
        return venturi.complete(await ctx.wait_for_signal("approval", str))

    @venturi.task(kind="wfw_gate")
    async def gate(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(await ctx.wait_for_signal("go", str))

    return {
        "gate": gate,
        "extract": extract,
        "transform": transform,
        "load": load,
        "ship": ship,
        "order": order,
        "gather": gather,
        "sleeper": sleeper,
        "approver": approver,
    }


async def run_flows(dsn: str, conn: Any) -> Flows:
    """Enqueue and run every workflow of ``Flows`` (register the tasks: call it under the
    ``kinds`` fixture, which forgets them after the test)."""
    t = _tasks()
    wf = venturi.Workflow()
    a = wf.add("extract", t["extract"].job(Item(3)))
    b = wf.add("transform", t["transform"].job(Item(0)), after=[a])
    wf.add("load", t["load"].job(Item(0)), after=[a, b])
    graph = await wf.enqueue(conn)
    gated = venturi.Workflow()
    first = gated.add("gate", t["gate"].job(Item(0)))
    gated.add("after", t["extract"].job(Item(0)), after=[first])
    gates = await gated.enqueue(conn)
    order = await t["order"].enqueue(conn, Item(5))
    gatherer = await t["gather"].enqueue(conn, Item(0))
    sleeper = await t["sleeper"].enqueue(conn, Item(0))
    approver = await t["approver"].enqueue(conn, Item(0))
    # Timers stay as they are: the sleeper must still be asleep afterwards.
    await venturi.testing.drain(dsn, list(t.values()), timers=False)
    ships = await venturi.admin.show_job(conn, order)
    gathered = await venturi.admin.show_job(conn, gatherer)
    assert ships is not None and gathered is not None
    return Flows(
        extract=graph["extract"],
        transform=graph["transform"],
        load=graph["load"],
        order=order,
        ships=[c.id for c in ships.children],
        gatherer=gatherer,
        gathered=[c.id for c in gathered.children],
        sleeper=sleeper,
        approver=approver,
        gate=gates["gate"],
        after_gate=gates["after"],
    )
