"""The ways an application may hold the database, as the driver tests open them
(tests/integration/test_drivers.py): asyncpg, psycopg 3 (connections and pools, sync and
async), psycopg2 and SQLAlchemy 2 (Connection, Session, Engine, AsyncConnection,
AsyncSession, over psycopg, psycopg2 and asyncpg).

Each is a ``Stack``: how to open it, how the application opens and ends its own
transaction on it, and venturi's calls on it (a sync driver's run in a thread, so that the
test's event loop keeps serving the worker).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import psycopg
import psycopg2
import psycopg2.extensions
import psycopg_pool
import sqlalchemy
import sqlalchemy.orm
from sqlalchemy.ext import asyncio as sa_asyncio

import venturi
from tests.support import sql as tsql


def _url(dsn: str, driver: str) -> str:
    return dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


class Stack:
    """One way of holding the database. ``native`` is what the application passes to
    venturi; ``transaction`` is None for a pool or engine (no caller transaction)."""

    name = "?"
    sync = False
    has_transaction = True

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.native: Any = None

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.sync:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await fn(*args, **kwargs)

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """The native's own ``close()``, off the loop for a sync driver; a stack that
        holds more (an engine, a session registry) closes that too."""
        await self.call(self.native.close)

    def transaction(self, commit: bool) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def app_write(self) -> None:
        raise NotImplementedError

    async def enqueue(self, task: venturi.Task[Any], carry: Any, **kw: Any) -> int:
        fn = task.enqueue_sync if self.sync else task.enqueue
        return int(await self.call(fn, self.native, carry, **kw))

    async def enqueue_many(self, jobs: list[Any]) -> list[int]:
        fn = venturi.enqueue_many_sync if self.sync else venturi.enqueue_many
        return list(await self.call(fn, self.native, jobs))

    async def get_job(self, job_id: int) -> venturi.JobInfo | None:
        fn = venturi.get_job_sync if self.sync else venturi.get_job
        job: venturi.JobInfo | None = await self.call(fn, self.native, job_id)
        return job

    async def get_journal(self, job_id: int) -> list[venturi.JournalEntry]:
        fn = venturi.get_journal_sync if self.sync else venturi.get_journal
        return list(await self.call(fn, self.native, job_id))


class _Rollback(Exception):
    """Raised out of a transaction block to end it in a rollback."""


@contextlib.asynccontextmanager
async def _ends(commit: bool) -> AsyncIterator[None]:
    """Swallow the rollback a test asked for."""
    try:
        yield
    except _Rollback:
        assert not commit


class _AsyncNative(Stack):
    """A driver's async connection, whose ``transaction()`` is an async context manager
    that commits on exit (asyncpg's and psycopg's alike)."""

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        async with _ends(commit), self.native.transaction():
            yield
            if not commit:
                raise _Rollback


# --- asyncpg --------------------------------------------------------------------------


class AsyncpgConnection(_AsyncNative):
    name = "asyncpg-connection"

    async def open(self) -> None:
        self.native = await asyncpg.connect(self.dsn)


class AsyncpgPool(Stack):
    name = "asyncpg-pool"
    has_transaction = False

    async def open(self) -> None:
        self.native = await asyncpg.create_pool(self.dsn, min_size=1, max_size=2)


# --- psycopg 3 --------------------------------------------------------------------------


class PsycopgAsync(_AsyncNative):
    name = "psycopg-async-connection"

    async def open(self) -> None:
        self.native = await psycopg.AsyncConnection.connect(self.dsn)


class PsycopgAsyncAutocommit(PsycopgAsync):
    """An autocommit connection: no implicit transaction; ``conn.transaction()`` opens
    one explicitly, and outside it each call commits by itself."""

    name = "psycopg-async-autocommit"

    async def open(self) -> None:
        self.native = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)


class PsycopgAsyncPool(Stack):
    name = "psycopg-async-pool"
    has_transaction = False

    async def open(self) -> None:
        self.native = psycopg_pool.AsyncConnectionPool(self.dsn, min_size=1, open=False)
        await self.native.open()


class PsycopgSync(Stack):
    """The application's own write opens psycopg's implicit transaction; the job joins it
    and ``commit()`` / ``rollback()`` end both."""

    name = "psycopg-connection"
    sync = True

    async def open(self) -> None:
        self.native = await asyncio.to_thread(psycopg.connect, self.dsn)

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        await self.app_write()
        try:
            yield
        except BaseException:
            await asyncio.to_thread(self.native.rollback)
            raise
        await asyncio.to_thread(self.native.commit if commit else self.native.rollback)

    async def app_write(self) -> None:
        await asyncio.to_thread(self.native.execute, tsql.statement("app_order_insert"))


class PsycopgSyncBlock(PsycopgSync):
    """psycopg's own transaction block (``with conn.transaction():``)."""

    name = "psycopg-connection-block"

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        block = self.native.transaction()
        await asyncio.to_thread(block.__enter__)
        try:
            yield
        except BaseException as exc:
            await asyncio.to_thread(block.__exit__, type(exc), exc, None)
            raise
        if commit:
            await asyncio.to_thread(block.__exit__, None, None, None)
        else:
            rollback = psycopg.Rollback()
            await asyncio.to_thread(block.__exit__, type(rollback), rollback, None)


class PsycopgSyncAutocommit(PsycopgSyncBlock):
    name = "psycopg-connection-autocommit"

    async def open(self) -> None:
        self.native = await asyncio.to_thread(psycopg.connect, self.dsn, autocommit=True)


class PsycopgSyncPool(Stack):
    name = "psycopg-pool"
    sync = True
    has_transaction = False

    async def open(self) -> None:
        self.native = psycopg_pool.ConnectionPool(self.dsn, min_size=1, open=False)
        await asyncio.to_thread(self.native.open)


# --- psycopg2 ---------------------------------------------------------------------------


class Psycopg2(PsycopgSync):
    name = "psycopg2-connection"

    async def open(self) -> None:
        self.native = await asyncio.to_thread(psycopg2.connect, self.dsn)

    async def app_write(self) -> None:
        def write() -> None:
            with self.native.cursor() as cur:
                cur.execute(tsql.statement("app_order_insert"))

        await asyncio.to_thread(write)


class Psycopg2Autocommit(Psycopg2):
    """An autocommit psycopg2 connection: no caller transaction, each call commits."""

    name = "psycopg2-autocommit"
    has_transaction = False

    async def open(self) -> None:
        await super().open()
        self.native.autocommit = True


# --- SQLAlchemy -------------------------------------------------------------------------


class AlchemyConnection(Stack):
    name = "sqlalchemy-connection-psycopg"
    sync = True
    driver = "psycopg"

    async def open(self) -> None:
        self.engine = sqlalchemy.create_engine(_url(self.dsn, self.driver))
        self.native = await asyncio.to_thread(self.engine.connect)

    async def close(self) -> None:
        await asyncio.to_thread(self.native.close)
        await asyncio.to_thread(self.engine.dispose)

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        tx = await asyncio.to_thread(self.native.begin)
        try:
            yield
        except BaseException:
            await asyncio.to_thread(tx.rollback)
            raise
        await asyncio.to_thread(tx.commit if commit else tx.rollback)


class AlchemySession(AlchemyConnection):
    name = "sqlalchemy-session-psycopg2"
    driver = "psycopg2"

    async def open(self) -> None:
        self.engine = sqlalchemy.create_engine(_url(self.dsn, self.driver))
        self.native = sqlalchemy.orm.Session(self.engine)

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        await asyncio.to_thread(self.native.begin)
        try:
            yield
        except BaseException:
            await asyncio.to_thread(self.native.rollback)
            raise
        await asyncio.to_thread(self.native.commit if commit else self.native.rollback)


class AlchemyScopedSession(AlchemySession):
    """Flask-SQLAlchemy's ``db.session`` is a scoped_session."""

    name = "sqlalchemy-scoped-session-psycopg"
    driver = "psycopg"

    async def open(self) -> None:
        self.engine = sqlalchemy.create_engine(_url(self.dsn, self.driver))
        self.native = sqlalchemy.orm.scoped_session(
            sqlalchemy.orm.sessionmaker(self.engine), scopefunc=lambda: "test"
        )

    async def close(self) -> None:
        await asyncio.to_thread(self.native.remove)
        await asyncio.to_thread(self.engine.dispose)


class AlchemyEngine(Stack):
    name = "sqlalchemy-engine-psycopg"
    sync = True
    has_transaction = False

    async def open(self) -> None:
        self.native = sqlalchemy.create_engine(_url(self.dsn, "psycopg"))

    async def close(self) -> None:
        await asyncio.to_thread(self.native.dispose)


class AlchemyAsyncConnection(Stack):
    name = "sqlalchemy-async-connection-asyncpg"
    driver = "asyncpg"

    async def open(self) -> None:
        self.engine = sa_asyncio.create_async_engine(_url(self.dsn, self.driver))
        self.native = await self.engine.connect()

    async def close(self) -> None:
        await self.native.close()
        await self.engine.dispose()

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        tx = await self.native.begin()
        try:
            yield
        except BaseException:
            await tx.rollback()
            raise
        await (tx.commit() if commit else tx.rollback())


class AlchemyAsyncSession(AlchemyAsyncConnection):
    name = "sqlalchemy-async-session-psycopg"
    driver = "psycopg"

    async def open(self) -> None:
        self.engine = sa_asyncio.create_async_engine(_url(self.dsn, self.driver))
        self.native = sa_asyncio.AsyncSession(self.engine)

    @contextlib.asynccontextmanager
    async def transaction(self, commit: bool) -> AsyncIterator[None]:
        await self.native.begin()
        try:
            yield
        except BaseException:
            await self.native.rollback()
            raise
        await (self.native.commit() if commit else self.native.rollback())


class AlchemyAsyncSessionAsyncpg(AlchemyAsyncSession):
    name = "sqlalchemy-async-session-asyncpg"
    driver = "asyncpg"


class AlchemyAsyncEngine(Stack):
    name = "sqlalchemy-async-engine-psycopg"
    has_transaction = False

    async def open(self) -> None:
        self.native = sa_asyncio.create_async_engine(_url(self.dsn, "psycopg"))

    async def close(self) -> None:
        await self.native.dispose()


STACKS = [
    AsyncpgConnection,
    AsyncpgPool,
    PsycopgAsync,
    PsycopgAsyncAutocommit,
    PsycopgAsyncPool,
    PsycopgSync,
    PsycopgSyncBlock,
    PsycopgSyncAutocommit,
    PsycopgSyncPool,
    Psycopg2,
    Psycopg2Autocommit,
    AlchemyConnection,
    AlchemySession,
    AlchemyScopedSession,
    AlchemyEngine,
    AlchemyAsyncConnection,
    AlchemyAsyncSession,
    AlchemyAsyncSessionAsyncpg,
    AlchemyAsyncEngine,
]
WITH_TRANSACTION = [s for s in STACKS if s.has_transaction]


@contextlib.asynccontextmanager
async def opened(s: Stack) -> AsyncIterator[Stack]:
    """The stack open, over a database that also holds the application's own table."""
    c = await asyncpg.connect(s.dsn)
    try:
        await c.execute(tsql.statement("app_orders_create"))
    finally:
        await c.close()
    await s.open()
    try:
        yield s
    finally:
        await s.close()
