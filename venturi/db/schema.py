"""The schema: which version a database has, and applying or upgrading it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from venturi import sql
from venturi.db import drivers
from venturi.db.conn import Conn
from venturi.db.drivers import Query, Steps
from venturi.db.errors import MISSING_SCHEMA, apply_hint, not_applied
from venturi.errors import SchemaError

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])


def needs_schema(fn: F) -> F:
    """For the application's own calls (enqueue, reads), which never check the schema
    version first: a missing table or schema becomes the ``SchemaError`` that says what
    to run, instead of the driver's undefined-table error."""

    @functools.wraps(fn)
    async def wrapper(conn: Any, *args: Any, schema: str, **kwargs: Any) -> Any:
        try:
            return await fn(conn, *args, schema=schema, **kwargs)
        except MISSING_SCHEMA:
            raise not_applied(schema) from None

    return cast(F, wrapper)


async def schema_version(conn: Conn, *, schema: str) -> int:
    """The applied schema version; ``SchemaError`` saying what to run when there is none
    or when it is older than this venturi needs."""
    try:
        version = await conn.fetchval(sql.statement("schema_version_get", schema))
    except MISSING_SCHEMA:
        version = None
    if version is None:
        raise not_applied(schema)
    latest = sql.latest_migration()
    if version < latest:
        raise SchemaError(
            f"the venturi schema {schema!r} is at version {version}, this venturi needs "
            f"{latest}: run `{apply_hint(schema)}`"
        )
    return int(version)


def apply_schema_steps() -> Steps[list[int]]:
    """Create or upgrade the schema (run ``atomic``: the whole upgrade is one
    transaction); the migration versions applied, none when the database is current.
    Concurrent appliers wait for each other on a lock."""
    yield Query("schema_lock")
    [exists] = yield Query("schema_version_exists")
    if not exists["applied"]:
        yield Query("schema/tables", script=True)
        yield Query("schema/indexes", script=True)
        return [m.version for m in sql.migrations()]
    done = {r["version"] for r in (yield Query("schema_version_list"))}
    applied = []
    for migration in sql.migrations():
        if migration.version not in done:
            yield Query(migration.template, script=True)
            yield Query("schema_version_record", (migration.version, migration.name))
            applied.append(migration.version)
    return applied


async def apply_schema(conn: Any, *, schema: str) -> list[int]:
    """``apply_schema_steps`` on one async connection (or a pool: one of its own)."""
    return await drivers.run(conn, apply_schema_steps(), schema=schema, atomic=True)


def apply_schema_sync(conn: Any, *, schema: str) -> list[int]:
    """``apply_schema_steps`` on a sync connection (Django's, in its migration)."""
    return drivers.run_sync(conn, apply_schema_steps(), schema=schema, atomic=True)
