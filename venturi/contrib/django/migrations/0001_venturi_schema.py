"""Applies venturi's schema to the ``VENTURI["DATABASE"]`` alias: venturi's own
migrate-to-latest (``venturi.db.schema.apply_schema_sync``), in the migration's
transaction. Upgrades after a venturi release are applied by the app's ``post_migrate``
handler (apps.py) on every ``migrate``, so this stays the only Django migration."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def apply_schema(apps: Any, schema_editor: Any) -> None:
    from venturi.contrib.django import config

    if schema_editor.connection.alias == config.database():
        config.apply_schema(schema_editor.connection.alias)


class Migration(migrations.Migration):  # type: ignore[misc]
    initial = True
    dependencies: list[tuple[str, str]] = []
    # Dropping venturi's tables is an operator's decision, not a migration's.
    operations = [migrations.RunPython(apply_schema, migrations.RunPython.noop)]
