"""The dashboard's pool: the caller's, or one made from a DSN on first use, checked once
to hold venturi's schema; its read-only transactions and its connections for actions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from venturi import sql
from venturi.admin import connection


class Database:
    """The pool the dashboard reads and acts through: the caller's, or one made from a
    DSN on first use (a mounted app gets no lifespan events of its own)."""

    def __init__(self, pool_or_dsn: Any, schema: str) -> None:
        self.schema = sql.validate_schema(schema)
        self._dsn: str | None = pool_or_dsn if isinstance(pool_or_dsn, str) else None
        self._pool: Any = None if self._dsn is not None else pool_or_dsn
        self._owned = self._dsn is not None
        self._checked = False
        self._lock = asyncio.Lock()

    async def pool(self) -> Any:
        if self._pool is not None and self._checked:
            return self._pool
        async with self._lock:
            if self._pool is None:
                assert self._dsn is not None
                self._pool = await connection.create_pool(self._dsn, min_size=1, max_size=4)
            if not self._checked:
                async with self._pool.acquire() as conn:
                    await connection.check_schema(conn, schema=self.schema)
                self._checked = True
        return self._pool

    async def close(self) -> None:
        """Close the pool if the dashboard made it."""
        if self._owned and self._pool is not None:
            await self._pool.close()
            self._pool = None
            self._checked = False

    @asynccontextmanager
    async def reading(self, *, serial: bool = True) -> AsyncIterator[Any]:
        """A read-only transaction whose statements are planned with their parameters;
        ``serial``: without parallel workers (every read but a full count)."""
        async with connection.reading(await self.pool(), schema=self.schema, serial=serial) as c:
            yield c

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[Any]:
        """A connection for an action; each statement commits on its own."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            yield conn
