"""Post two orders to the shop with Django's test client: one accepted (the order, its
shipping job and its receipt task commit together), one refused after its jobs were
enqueued (all three roll back). Then ``manage.py venturi worker orders.jobs`` runs them:

    cd examples/django_shop
    export VENTURI_DSN=postgresql://...
    python manage.py migrate
    python try_it.py
    python manage.py venturi worker orders.jobs     # Ctrl-C when the jobs are done
"""

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")

import django

django.setup()

from django.test import Client  # noqa: E402
from orders.models import Order  # noqa: E402

client = Client()
ok = client.post("/orders", json.dumps({"item": "teapot"}), content_type="application/json")
print(f"POST /orders teapot -> {ok.status_code} {ok.content.decode()}")
bad = client.post(
    "/orders", json.dumps({"item": "cup", "quantity": 0}), content_type="application/json"
)
print(f"POST /orders cup x0 -> {bad.status_code}")
print(f"orders: {list(Order.objects.values_list('item', flat=True))}")
