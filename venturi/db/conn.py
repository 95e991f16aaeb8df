"""The seam between venturi and a database driver.

The worker's statement functions in ``venturi.db`` take a ``Conn``: the four query
methods asyncpg's Connection and Pool share (the worker runs on asyncpg). ``TxConn`` adds
the transaction a statement group needs; ``Source`` is what hands out connections (a
pool). The application's calls (enqueue, reads, schema apply) take any driver the
application holds instead, through ``venturi.db.drivers``.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

# A result row: read by column name (``row["id"]``). asyncpg's Record is untyped.
Record = Any


class Conn(Protocol):
    """What runs one statement with ``$n`` bind parameters."""

    async def fetch(self, query: str, *args: Any) -> list[Record]: ...

    async def fetchrow(self, query: str, *args: Any) -> Record | None: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    async def execute(self, query: str, *args: Any) -> str: ...


class TxConn(Conn, Protocol):
    """A single connection: it can open a transaction (a savepoint inside an open one)."""

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


class Source(Conn, Protocol):
    """Hands out connections (asyncpg's Pool, the worker's held connection): ``acquire``
    is used as ``async with source.acquire() as conn``."""

    def acquire(self) -> Any: ...
