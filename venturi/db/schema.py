"""The schema: which version a database has, and applying or upgrading it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from venturi import sql
from venturi.db.conn import Conn
from venturi.db.errors import MISSING_SCHEMA
from venturi.errors import SchemaError

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])


def not_applied(schema: str) -> SchemaError:
    return SchemaError(
        f"the venturi schema {schema!r} is not applied to this database: "
        f"run `venturi schema apply --schema {schema}`"
    )


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
    latest = sql.migrations(schema)[-1].version
    if version < latest:
        raise SchemaError(
            f"the venturi schema {schema!r} is at version {version}, this venturi needs "
            f"{latest}: run `venturi schema apply --schema {schema}`"
        )
    return int(version)


async def apply_schema(conn: Any, *, schema: str) -> list[int]:
    """Create or upgrade the schema; returns the migration versions it applied (none when
    the database is current). Concurrent appliers wait for each other on a lock.
    ``conn`` is one connection (a ``TxConn``): the whole upgrade is one transaction."""
    async with conn.transaction():
        await conn.execute(sql.statement("schema_lock", schema))
        if not await conn.fetchval(sql.statement("schema_version_exists", schema)):
            await conn.execute(sql.fresh_schema(schema))
            return [m.version for m in sql.migrations(schema)]
        done = {
            r["version"] for r in await conn.fetch(sql.statement("schema_version_list", schema))
        }
        applied = []
        for migration in sql.migrations(schema):
            if migration.version not in done:
                await conn.execute(migration.sql)
                await conn.execute(
                    sql.statement("schema_version_record", schema),
                    migration.version,
                    migration.name,
                )
                applied.append(migration.version)
        return applied
