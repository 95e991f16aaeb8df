"""The application's own database stack, behind one seam: asyncpg, psycopg 3 (and its
pools), psycopg2, SQLAlchemy 2 (sync and async, over psycopg, psycopg2 or asyncpg) and
Django's connection.

The application's calls (enqueue, enqueue many, get_job, get_journal) are written once,
as *steps*: a generator that yields each ``Query`` it runs (a statement's name and its
``$n`` values, in order) and is sent back that statement's rows (mappings by column
name), returning its answer. ``run`` and ``run_sync`` drive the steps on what the caller
passed, rendering each statement in that driver's parameter style (``sql.STYLES``):

- asyncpg: the statement as it is (``$n``), on the Connection or Pool;
- psycopg 3, psycopg2 and Django: a DBAPI cursor, ``%(pn)s`` placeholders;
- SQLAlchemy: ``Connection.exec_driver_sql`` in the dialect's DBAPI style (``$n`` for
  asyncpg, ``%(pn)s`` for psycopg and psycopg2), so the statement runs inside
  SQLAlchemy's own transaction (its autobegin, the asyncpg dialect's deferred BEGIN)
  and SQLAlchemy's commit or rollback covers it.

Transactions, the same for every driver: on a connection or session with an open
transaction the steps join it (they commit or roll back with it); without one they run in
a transaction of their own that commits before ``run`` returns (asyncpg and an autocommit
psycopg connection: each statement commits by itself, unless the steps are ``atomic``).
On a pool or engine a connection is taken and the transaction commits. ``atomic`` steps
(several statements that are all or nothing) run in a savepoint inside an open
transaction.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from venturi import sql
from venturi.db.conn import Conn
from venturi.db.connect import transaction
from venturi.db.errors import schema_error_of, schema_error_of_sync

if TYPE_CHECKING:
    from typing import TypeAlias

    import psycopg
    import psycopg2.extensions
    import psycopg_pool
    import sqlalchemy
    import sqlalchemy.ext.asyncio
    import sqlalchemy.orm

T = TypeVar("T")

# A result row, read by column name: asyncpg's Record, or a dict.
Row = Mapping[str, Any]


class Query(NamedTuple):
    """One statement to run: its template's name and the values of its ``$1..$n``. A
    ``script`` (the schema's tables, a migration) is several statements and no values,
    run by the simple query protocol; it returns no rows. A query without values is
    sent as rendered, with no parameters (so no driver reads its ``%`` as a
    placeholder)."""

    name: str
    args: tuple[Any, ...] = ()
    script: bool = False


# What an operation is written as: yields its queries, is sent their rows, returns.
Steps = Generator[Query, list[Row], T]


class DjangoConnection(Protocol):
    """Django's connection (``django.db.connection``, ``connections[alias]``): Django
    ships no type information, so the parts venturi uses are described here."""

    alias: str
    vendor: str
    in_atomic_block: bool

    def cursor(self) -> Any: ...


if TYPE_CHECKING:
    # What the async calls (``await task.enqueue(conn, ...)``) take. ``Conn`` stands for
    # asyncpg's Connection and Pool (asyncpg has no type information) and the worker's
    # look-alikes.
    AsyncConnection: TypeAlias = (
        Conn
        | psycopg.AsyncConnection[Any]
        | psycopg_pool.AsyncConnectionPool[Any]
        | sqlalchemy.ext.asyncio.AsyncConnection
        | sqlalchemy.ext.asyncio.AsyncSession
        | sqlalchemy.ext.asyncio.AsyncEngine
        | sqlalchemy.ext.asyncio.async_scoped_session[Any]
    )
    # What the sync calls (``task.enqueue_sync(conn, ...)``) take.
    SyncConnection: TypeAlias = (
        psycopg.Connection[Any]
        | psycopg_pool.ConnectionPool[Any]
        | psycopg2.extensions.connection
        | sqlalchemy.Connection
        | sqlalchemy.orm.Session
        | sqlalchemy.orm.scoped_session[Any]
        | sqlalchemy.Engine
        | DjangoConnection
    )


def _is(obj: object, module: str, name: str) -> bool:
    """Is ``obj`` an instance of ``module.name``? Never imports: an object of a driver's
    class means its module is loaded, and a driver that is not installed is not asked."""
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and isinstance(obj, cls)


def _described(description: Any, rows: Any) -> list[Row]:
    """DBAPI rows as mappings by column name."""
    if description is None:
        return []
    names = [d[0] for d in description]
    return [dict(zip(names, row, strict=True)) for row in rows]


def _sa_style(conn: Any) -> str:
    """The parameter style of a SQLAlchemy connection's DBAPI, or TypeError."""
    dialect = conn.dialect
    if dialect.name != "postgresql":
        raise TypeError(f"venturi needs PostgreSQL, got a SQLAlchemy {dialect.name} connection")
    style = {"numeric_dollar": "dollar", "pyformat": "pyformat"}.get(dialect.paramstyle)
    if style is None:
        raise TypeError(
            f"SQLAlchemy's {dialect.driver} driver (paramstyle {dialect.paramstyle}) is not "
            "supported: use postgresql+psycopg, postgresql+psycopg2 or postgresql+asyncpg"
        )
    return style


# --- executing one query, per driver -------------------------------------------------


class _Asyncpg:
    def __init__(self, conn: Conn, schema: str) -> None:
        self.conn, self.schema = conn, schema

    async def rows(self, q: Query) -> list[Row]:
        if q.script:
            await self.conn.execute(sql.statement(q.name, self.schema))
            return []
        return list(await self.conn.fetch(sql.statement(q.name, self.schema), *q.args))


class _AsyncCursor:
    """psycopg 3's AsyncConnection."""

    def __init__(self, conn: Any, schema: str) -> None:
        self.conn, self.schema = conn, schema

    async def rows(self, q: Query) -> list[Row]:
        async with self.conn.cursor() as cur:
            if q.args:
                await cur.execute(
                    sql.statement(q.name, self.schema, "pyformat"), sql.bind(q.args, "pyformat")
                )
            else:
                await cur.execute(sql.statement(q.name, self.schema))
            if cur.description is None:
                return []
            return _described(cur.description, await cur.fetchall())


class _Cursor:
    """A DBAPI connection: psycopg 3's Connection, psycopg2's, Django's."""

    def __init__(self, conn: Any, schema: str) -> None:
        self.conn, self.schema = conn, schema

    def rows(self, q: Query) -> list[Row]:
        with self.conn.cursor() as cur:
            if q.args:
                cur.execute(
                    sql.statement(q.name, self.schema, "pyformat"), sql.bind(q.args, "pyformat")
                )
            else:
                cur.execute(sql.statement(q.name, self.schema))
            if cur.description is None:
                return []
            return _described(cur.description, cur.fetchall())


class _AsyncAlchemy:
    """SQLAlchemy's AsyncConnection."""

    def __init__(self, conn: Any, schema: str) -> None:
        self.conn, self.schema, self.style = conn, schema, _sa_style(conn)

    async def rows(self, q: Query) -> list[Row]:
        if not q.args:
            result = await self.conn.exec_driver_sql(sql.statement(q.name, self.schema))
        else:
            result = await self.conn.exec_driver_sql(
                sql.statement(q.name, self.schema, self.style), sql.bind(q.args, self.style)
            )
        return [dict(r._mapping) for r in result] if result.returns_rows else []


class _Alchemy:
    """SQLAlchemy's Connection."""

    def __init__(self, conn: Any, schema: str) -> None:
        self.conn, self.schema, self.style = conn, schema, _sa_style(conn)

    def rows(self, q: Query) -> list[Row]:
        if not q.args:
            result = self.conn.exec_driver_sql(sql.statement(q.name, self.schema))
        else:
            result = self.conn.exec_driver_sql(
                sql.statement(q.name, self.schema, self.style), sql.bind(q.args, self.style)
            )
        return [dict(r._mapping) for r in result] if result.returns_rows else []


class _AsyncExec(Protocol):
    async def rows(self, q: Query) -> list[Row]: ...


class _SyncExec(Protocol):
    def rows(self, q: Query) -> list[Row]: ...


# --- opening: join the caller's transaction, or commit one of our own ---------------

_ASYNC_TAKES = (
    "an asyncpg Connection or Pool, a psycopg AsyncConnection or AsyncConnectionPool, or "
    "a SQLAlchemy AsyncConnection, AsyncSession or AsyncEngine"
)
_SYNC_TAKES = (
    "a psycopg Connection or ConnectionPool, a psycopg2 connection, a SQLAlchemy "
    "Connection, Session or Engine, or a Django connection"
)


def _idle(conn: Any) -> bool:
    """Has this psycopg 3 connection no transaction open?"""
    return bool(conn.info.transaction_status.name == "IDLE")


def _is_sync(conn: object) -> bool:
    return (
        _is(conn, "psycopg", "Connection")
        or _is(conn, "psycopg_pool", "ConnectionPool")
        or _is(conn, "psycopg2.extensions", "connection")
        or _is(conn, "sqlalchemy.engine", "Connection")
        or _is(conn, "sqlalchemy.engine", "Engine")
        or _is(conn, "sqlalchemy.orm", "Session")
        or _is(conn, "sqlalchemy.orm", "scoped_session")
        or _is(conn, "django.db.backends.base.base", "BaseDatabaseWrapper")
        or _is(conn, "django.utils.connection", "ConnectionProxy")
    )


def _is_async(conn: object) -> bool:
    return (
        _is(conn, "psycopg", "AsyncConnection")
        or _is(conn, "psycopg_pool", "AsyncConnectionPool")
        or _is(conn, "sqlalchemy.ext.asyncio", "AsyncConnection")
        or _is(conn, "sqlalchemy.ext.asyncio", "AsyncSession")
        or _is(conn, "sqlalchemy.ext.asyncio", "AsyncEngine")
        or _is(conn, "sqlalchemy.ext.asyncio", "async_scoped_session")
        or (hasattr(conn, "fetch") and not _is_sync(conn))
    )


@contextlib.asynccontextmanager
async def _open_async(conn: Any, schema: str, atomic: bool) -> AsyncIterator[_AsyncExec]:
    if _is(conn, "psycopg", "AsyncConnection"):
        if atomic or (_idle(conn) and not conn.autocommit):
            # A transaction of its own when idle (it commits at the end), a savepoint
            # inside an open one.
            async with conn.transaction():
                yield _AsyncCursor(conn, schema)
        else:
            yield _AsyncCursor(conn, schema)
    elif _is(conn, "psycopg_pool", "AsyncConnectionPool"):
        async with conn.connection() as held, _open_async(held, schema, atomic) as ex:
            yield ex
    elif _is(conn, "sqlalchemy.ext.asyncio", "AsyncConnection"):
        if not conn.in_transaction():
            async with conn.begin():
                yield _AsyncAlchemy(conn, schema)
        elif atomic:
            async with conn.begin_nested():
                yield _AsyncAlchemy(conn, schema)
        else:
            yield _AsyncAlchemy(conn, schema)
    elif _is(conn, "sqlalchemy.ext.asyncio", "async_scoped_session"):
        async with _open_async(conn(), schema, atomic) as ex:
            yield ex
    elif _is(conn, "sqlalchemy.ext.asyncio", "AsyncSession"):
        if not conn.in_transaction():
            async with conn.begin():
                yield _AsyncAlchemy(await conn.connection(), schema)
        elif atomic:
            async with conn.begin_nested():
                yield _AsyncAlchemy(await conn.connection(), schema)
        else:
            yield _AsyncAlchemy(await conn.connection(), schema)
    elif _is(conn, "sqlalchemy.ext.asyncio", "AsyncEngine"):
        async with conn.begin() as held:
            yield _AsyncAlchemy(held, schema)
    elif _is_sync(conn):
        raise TypeError(
            f"{type(conn).__name__} is a synchronous connection: call the _sync variant "
            "(task.enqueue_sync, venturi.enqueue_many_sync, venturi.get_job_sync)"
        )
    elif hasattr(conn, "fetch"):
        # asyncpg's Connection or Pool, or a look-alike of the worker's: each statement
        # commits by itself outside a transaction, so only atomic steps open one.
        if atomic:
            async with transaction(conn) as tx:
                yield _Asyncpg(tx, schema)
        else:
            yield _Asyncpg(conn, schema)
    else:
        raise TypeError(f"venturi takes {_ASYNC_TAKES}, got {type(conn).__name__}")


@contextlib.contextmanager
def _psycopg2(conn: Any, schema: str, atomic: bool) -> Iterator[_SyncExec]:
    ex = _Cursor(conn, schema)
    # psycopg2 has no transaction API: its status says whether the caller has one open.
    if conn.get_transaction_status() != 0:  # not TRANSACTION_STATUS_IDLE
        if not atomic:
            yield ex
            return
        ex.rows(Query("transaction/savepoint"))
        try:
            yield ex
        except BaseException:
            ex.rows(Query("transaction/savepoint_rollback"))
            raise
        ex.rows(Query("transaction/savepoint_release"))
        return
    if conn.autocommit and not atomic:
        yield ex
        return
    autocommit = conn.autocommit
    conn.autocommit = False
    try:
        yield ex
    except BaseException:
        conn.rollback()
        raise
    else:
        conn.commit()
    finally:
        conn.autocommit = autocommit


@contextlib.contextmanager
def _open_sync(conn: Any, schema: str, atomic: bool) -> Iterator[_SyncExec]:
    if _is(conn, "psycopg", "Connection"):
        if atomic or (_idle(conn) and not conn.autocommit):
            with conn.transaction():
                yield _Cursor(conn, schema)
        else:
            yield _Cursor(conn, schema)
    elif _is(conn, "psycopg_pool", "ConnectionPool"):
        with conn.connection() as held, _open_sync(held, schema, atomic) as ex:
            yield ex
    elif _is(conn, "psycopg2.extensions", "connection"):
        with _psycopg2(conn, schema, atomic) as ex:
            yield ex
    elif _is(conn, "sqlalchemy.engine", "Connection"):
        if not conn.in_transaction():
            with conn.begin():
                yield _Alchemy(conn, schema)
        elif atomic:
            with conn.begin_nested():
                yield _Alchemy(conn, schema)
        else:
            yield _Alchemy(conn, schema)
    elif _is(conn, "sqlalchemy.orm", "scoped_session"):
        # Flask-SQLAlchemy's db.session: the session of the current scope.
        with _open_sync(conn(), schema, atomic) as ex:
            yield ex
    elif _is(conn, "sqlalchemy.orm", "Session"):
        if not conn.in_transaction():
            with conn.begin():
                yield _Alchemy(conn.connection(), schema)
        elif atomic:
            with conn.begin_nested():
                yield _Alchemy(conn.connection(), schema)
        else:
            yield _Alchemy(conn.connection(), schema)
    elif _is(conn, "sqlalchemy.engine", "Engine"):
        with conn.begin() as held:
            yield _Alchemy(held, schema)
    elif _is(conn, "django.utils.connection", "ConnectionProxy"):
        # django.db.connection: stands for the default alias's connection of this thread.
        from django.db import connections

        with _open_sync(connections[conn.alias], schema, atomic) as ex:
            yield ex
    elif _is(conn, "django.db.backends.base.base", "BaseDatabaseWrapper"):
        if conn.vendor != "postgresql":
            raise TypeError(f"venturi needs PostgreSQL, got Django's {conn.vendor} backend")
        from django.db import transaction as django_transaction

        if conn.in_atomic_block and not atomic:
            yield _Cursor(conn, schema)
        else:
            # Outermost: a transaction that commits at the end; nested: a savepoint.
            with django_transaction.atomic(using=conn.alias):
                yield _Cursor(conn, schema)
    elif _is_async(conn):
        raise TypeError(
            f"{type(conn).__name__} is an asynchronous connection: await the async call "
            "(task.enqueue, venturi.enqueue_many, venturi.get_job)"
        )
    else:
        raise TypeError(f"venturi takes {_SYNC_TAKES}, got {type(conn).__name__}")


# --- driving the steps ---------------------------------------------------------------


async def _drive(conn: Any, steps: Steps[T], schema: str, atomic: bool) -> T:
    async with _open_async(conn, schema, atomic) as ex:
        try:
            query = next(steps)
            while True:
                query = steps.send(await ex.rows(query))
        except StopIteration as done:
            answer: T = done.value
            return answer


def _drive_sync(conn: Any, steps: Steps[T], schema: str, atomic: bool) -> T:
    with _open_sync(conn, schema, atomic) as ex:
        try:
            query = next(steps)
            while True:
                query = steps.send(ex.rows(query))
        except StopIteration as done:
            answer: T = done.value
            return answer


def _version() -> Steps[int | None]:
    """The applied schema version, read when a statement failed for want of a column."""
    [row] = yield Query("schema_version_get")
    version = row["version"]
    return None if version is None else int(version)


async def run(
    conn: Any, steps: Steps[T], *, schema: str, atomic: bool = False, explain: bool = True
) -> T:
    """Run ``steps`` on an async connection, pool, session or engine (see the module's
    docstring for which transaction they run in); their answer. A statement that names
    what the schema lacks raises the ``SchemaError`` saying what to run (``explain``
    False: the driver's error, as the schema's own apply needs: a migration failing for
    want of a column said "run `venturi schema apply`", the command that had failed)."""
    try:
        return await _drive(conn, steps, schema, atomic)
    except Exception as exc:
        if not explain:
            raise
        error = await schema_error_of(exc, schema, lambda: _drive(conn, _version(), schema, False))
        if error is None:
            raise
        raise error from None


def run_sync(
    conn: Any, steps: Steps[T], *, schema: str, atomic: bool = False, explain: bool = True
) -> T:
    """``run`` for a synchronous connection, pool, session or engine."""
    if _is(conn, "venturi.blocking", "BlockingConnection"):
        # A sync handler's ctx.transaction(): the steps run on the worker's loop, on the
        # asyncpg connection in its transaction (it forwards asyncpg's methods, and was
        # refused as an asynchronous connection that the handler could not await). Found
        # by name: the database layer imports nothing above it.
        driven: T = conn.drive(
            lambda raw: run(raw, steps, schema=schema, atomic=atomic, explain=explain)
        )
        return driven
    try:
        return _drive_sync(conn, steps, schema, atomic)
    except Exception as exc:
        if not explain:
            raise
        error = schema_error_of_sync(
            exc, schema, lambda: _drive_sync(conn, _version(), schema, False)
        )
        if error is None:
            raise
        raise error from None
