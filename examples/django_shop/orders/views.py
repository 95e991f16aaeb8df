import json

from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse

from orders import jobs, tasks
from orders.models import Order


def create_order(request: HttpRequest) -> HttpResponse:
    body = json.loads(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(item=body["item"])
            # Both jobs are rows of this block's transaction: they commit with the order,
            # or roll back with it. (transaction.on_commit would only run code after a
            # commit; a crash in between would lose the job. Here there is no between.)
            job_id = jobs.ship.enqueue_sync(connection, jobs.Ship(order.id), key=f"ship-{order.id}")
            receipt = tasks.write_receipt.enqueue(order.id)
            if body.get("quantity", 1) < 1:
                raise ValueError("quantity must be at least 1")
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=422)
    return JsonResponse({"order": order.id, "job": job_id, "receipt": receipt.id}, status=202)


def receipt(request: HttpRequest, order_id: int) -> HttpResponse:
    order = Order.objects.get(id=order_id)
    return JsonResponse({"shipped": order.shipped, "receipt": order.receipt})
