"""The Django app: after every ``manage.py migrate``, venturi's schema is brought to this
venturi's latest version (its own migrations, idempotent, under a lock)."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.db.models.signals import post_migrate

from venturi import db


class VenturiConfig(AppConfig):  # type: ignore[misc]
    name = "venturi.contrib.django"
    label = "venturi"
    verbose_name = "venturi"

    def ready(self) -> None:
        post_migrate.connect(_upgrade_schema, sender=self, dispatch_uid="venturi.schema")
        # In a Django project the schema comes with `manage.py migrate`: the errors of a
        # missing or older schema say so (enqueue, the worker, `manage.py venturi ...`).
        db.errors.set_apply_hint(_migrate_command())


def _migrate_command() -> str:
    from venturi.contrib.django import config

    try:
        alias = config.database()
    except ImproperlyConfigured:
        return "manage.py migrate"  # a bad VENTURI setting is reported where it is used
    return (
        "manage.py migrate"
        if alias == DEFAULT_DB_ALIAS
        else f"manage.py migrate --database {alias}"
    )


def _upgrade_schema(sender: Any, using: str, **kwargs: Any) -> None:
    """The Django migration applied the schema once; a later venturi brings migrations
    of its own, which this applies on the next ``migrate`` without a Django migration
    per venturi release."""
    from venturi.contrib.django import config

    if using == config.database():
        config.apply_schema(using)
