"""How the command line and the dashboard reach the database for an operator's call:
connect (or make a pool) and check that the schema is applied, apply it, and open the
dashboard's read-only transactions. The calls of ``venturi.admin`` then take the
connection (or pool) these return."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from venturi import db
from venturi.sql import DEFAULT_SCHEMA


async def connect(dsn: str, *, schema: str | None = DEFAULT_SCHEMA) -> Any:
    """An asyncpg connection to ``dsn``; with ``schema``, checked to hold venturi's tables
    (``SchemaError`` saying what to run if not). The caller closes it."""
    conn = await db.connect.connect(dsn)
    if schema is not None:
        try:
            await check_schema(conn, schema=schema)
        except BaseException:
            await conn.close()
            raise
    return conn


async def create_pool(dsn: str, *, min_size: int, max_size: int) -> Any:
    """An asyncpg pool to ``dsn``; the caller closes it."""
    return await db.connect.create_pool(dsn, min_size=min_size, max_size=max_size)


async def check_schema(conn: Any, *, schema: str = DEFAULT_SCHEMA) -> int:
    """The schema version applied (``SchemaError`` saying what to run if none is)."""
    return await db.schema.schema_version(conn, schema=schema)


async def apply_schema(
    conn: Any, *, schema: str = DEFAULT_SCHEMA, lock_timeout: float | None = None
) -> list[int]:
    """Apply venturi's schema: the numbers of the migrations it applied (none: up to date).
    Each lock is waited for at most ``lock_timeout`` seconds (workers' claims queue behind
    the wait; None: ``db.schema.LOCK_TIMEOUT``), a few attempts; then ``SchemaError``
    naming the session that held it."""
    if lock_timeout is None:
        lock_timeout = db.schema.LOCK_TIMEOUT
    return await db.schema.apply_schema(conn, schema=schema, lock_timeout=lock_timeout)


@asynccontextmanager
async def reading(pool: Any, *, schema: str, serial: bool = True) -> AsyncIterator[Any]:
    """A read-only transaction whose statements are planned with their parameters;
    ``serial``: without parallel workers (every read but a full count)."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        await db.dashboard.dashboard_read_settings(conn, schema=schema)
        if serial:
            await db.dashboard.dashboard_read_serial(conn, schema=schema)
        yield conn
