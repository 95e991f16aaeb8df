"""A Django task (the Tasks framework), run by venturi through VenturiBackend."""

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def write_receipt(order_id: int) -> str:
    from orders.models import Order

    text = f"receipt for order {order_id}"
    Order.objects.filter(id=order_id).update(receipt=text)
    return text
