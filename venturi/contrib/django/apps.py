"""The Django app: after every ``manage.py migrate``, venturi's schema is brought to this
venturi's latest version (its own migrations, idempotent, under a lock)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class VenturiConfig(AppConfig):  # type: ignore[misc]
    name = "venturi.contrib.django"
    label = "venturi"
    verbose_name = "venturi"

    def ready(self) -> None:
        post_migrate.connect(_upgrade_schema, sender=self, dispatch_uid="venturi.schema")


def _upgrade_schema(sender: Any, using: str, **kwargs: Any) -> None:
    """The Django migration applied the schema once; a later venturi brings migrations
    of its own, which this applies on the next ``migrate`` without a Django migration
    per venturi release."""
    from venturi.contrib.django import config

    if using == config.database():
        config.apply_schema(using)
