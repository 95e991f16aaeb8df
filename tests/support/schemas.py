"""A database as an older release left it: its migrations applied and recorded, for the
tests of an upgrade and of the current code against a database not yet upgraded."""

from __future__ import annotations

from typing import Any

from venturi import sql


async def migrated_to(conn: Any, version: int, *, schema: str = sql.DEFAULT_SCHEMA) -> None:
    """Apply migrations 1 to ``version`` on ``conn`` and record them, as ``schema apply``
    of the release that ended at ``version`` did."""
    for m in sql.migrations(schema):
        if m.version > version:
            break
        await conn.execute(m.sql)
        await conn.execute(sql.statement("schema_version_record", schema), m.version, m.name)
