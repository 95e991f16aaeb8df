"""venturi tasks of the shop: run by ``manage.py venturi worker orders.jobs``."""

from typing import Any

import msgspec
from asgiref.sync import sync_to_async

import venturi


class Ship(msgspec.Struct):
    order_id: int


@venturi.task("shop_ship")
async def ship(ctx: venturi.Context[Any], carry: Ship) -> venturi.Outcome:
    from orders.models import Order

    # The ORM is synchronous: the worker's own event loop hands it to a thread.
    updated = await sync_to_async(Order.objects.filter(id=carry.order_id).update)(shipped=True)
    return venturi.complete({"shipped": carry.order_id, "rows": updated})
