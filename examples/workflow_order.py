"""A workflow: an order saga as one durable job (docs/workflows.md).

The order job charges the card (a step with its idempotency key), reserves stock in
the database exactly once (a transactional step), waits for a manager's approval (a
signal, with a timeout), cools off (a durable timer), then ships three parcels as child
jobs and gathers their receipts. Each time the job waits it gives up its worker slot;
when the approval comes, or the timer is due, or the last parcel ships, it runs again
from the top, and every recorded step returns its stored value instead of running.

Run it against a database with the venturi schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/workflow_order.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from datetime import timedelta

import asyncpg
import msgspec

import venturi
from venturi import Context


class Order(msgspec.Struct):
    """The order job's carry."""

    ref: str
    card: str
    total_cents: int
    sku: str
    parcels: int


class Approval(msgspec.Struct):
    """The payload of the "approval" signal."""

    by: str
    approved: bool


class Parcel(msgspec.Struct):
    order_ref: str
    n: int


class Shipment(msgspec.Struct):
    """A parcel's result (``result=Shipment`` on its task), which ``gather`` decodes."""

    parcel: int
    tracking: str


class Receipt(msgspec.Struct):
    order_ref: str
    charge_id: str
    tracking: list[str]


class PaymentProvider:
    """A stand-in for a payment API: a charge with an idempotency key it has seen before
    returns the first charge (how real providers make a retried request safe)."""

    def __init__(self) -> None:
        self.charges: dict[str, str] = {}
        self.requests: Counter[str] = Counter()

    async def charge(self, card: str, cents: int, idempotency_key: str) -> str:
        self.requests[idempotency_key] += 1
        return self.charges.setdefault(idempotency_key, f"ch_{uuid.uuid4().hex[:10]}")


PROVIDER = PaymentProvider()


async def reserve_stock(conn: asyncpg.Connection, order_ref: str, sku: str) -> int:
    """Runs inside the step's transaction: the reservation commits with the step's record."""
    reservation: int = await conn.fetchval(
        "INSERT INTO example_reservations (order_ref, sku) VALUES ($1, $2) RETURNING id",
        order_ref,
        sku,
    )
    return reservation


@venturi.task(kind="example_ship_parcel", result=Shipment)
async def ship_parcel(ctx: Context[None], carry: Parcel) -> venturi.Outcome:
    return venturi.complete(Shipment(carry.n, f"TRK-{carry.order_ref}-{carry.n}"))


@venturi.task(kind="example_order", result=Receipt)
async def order(ctx: Context[None], carry: Order) -> venturi.Outcome:
    # At least once: the key makes a repeated charge request (a crash right after the
    # provider answered, before the step was recorded) return the same charge.
    key = ctx.step_key("charge")
    charge_id = await ctx.step("charge", PROVIDER.charge, carry.card, carry.total_cents, key)
    # Exactly once: the insert and the step's record commit in one transaction.
    await ctx.step("reserve", reserve_stock, carry.ref, carry.sku, transactional=True)
    try:
        approval = await ctx.wait_for_signal("approval", Approval, timeout=timedelta(days=2))
    except venturi.SignalTimeout:
        return venturi.dead("nobody approved the order within two days")
    if not approval.approved:
        return venturi.dead(f"rejected by {approval.by}")
    await ctx.sleep("cool-off", timedelta(seconds=1))
    parcels = [
        await ctx.spawn(f"ship-{i}", ship_parcel, Parcel(carry.ref, i))
        for i in range(carry.parcels)
    ]
    shipments: list[Shipment] = await ctx.gather(*parcels)
    return venturi.complete(Receipt(carry.ref, charge_id, [s.tracking for s in shipments]))


async def wait_until_waiting_for_approval(conn: asyncpg.Connection, job_id: int) -> None:
    while True:
        job = await venturi.get_job(conn, job_id)
        if job is not None and job.status == "waiting":
            journal = await venturi.get_journal(conn, job_id)
            if any(e.event == "waiting" and "approval" in (e.detail or "") for e in journal):
                return
        await asyncio.sleep(0.05)


async def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    ref = uuid.uuid4().hex[:6]  # the example can run again on the same database
    conn = await asyncpg.connect(dsn)
    worker = venturi.Worker(None, dsn, [order, ship_parcel], concurrency=4, poll_max=30)
    shutdown = asyncio.Event()
    running = asyncio.create_task(worker.run(shutdown))
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS example_reservations ("
            " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, order_ref text, sku text)"
        )
        job_id = await order.enqueue(conn, Order(ref, "4242", 1999, "sku-7", parcels=3))
        print(f"order {ref}: job {job_id} enqueued")
        await asyncio.wait_for(wait_until_waiting_for_approval(conn, job_id), 60)
        print(f"order {ref}: charged, stock reserved; waiting for approval, holding no slot")
        sent = await venturi.signal(conn, job_id, "approval", Approval("maria", True))
        print(f"approval sent: {sent}")
        done = await venturi.wait(conn, job_id, timeout=60)
        receipt = msgspec.convert(done.result, Receipt)
        print(f"order {ref}: {done.status}; tracking {', '.join(receipt.tracking)}")

        reserved = await conn.fetchval(
            "SELECT count(*) FROM example_reservations WHERE order_ref = $1", ref
        )
        # One order in this process: every charge request it made, whatever the key.
        key_requests = sum(PROVIDER.requests.values())
        events = Counter(e.event for e in await venturi.get_journal(conn, job_id))
        print(
            f"charge requests: {key_requests}, reservations: {reserved}, "
            f"waits: {events['waiting']}, wake-ups: {events['woken']}"
        )
        assert done.status == "completed" and reserved == 1 and key_requests == 1
        assert len(receipt.tracking) == 3
        print("ok: each step once across every replay, three parcels shipped")
    finally:
        shutdown.set()
        await running
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
