"""The application's own calls on a database without venturi's schema, or with an older
one than this venturi needs: a ``SchemaError`` that says what to run, never the driver's
``UndefinedTableError`` or ``UndefinedColumnError``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import venturi
from tests.support.schemas import migrated_to
from venturi import SchemaError, db, sql
from venturi.db.enqueue import COPY_MIN_ROWS

NOT_APPLIED = (
    "the venturi schema {schema!r} is not applied to this database: "
    "run `venturi schema apply --schema {schema} --dsn <DSN>`"
)


@pytest.fixture
async def bare(empty_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(empty_dsn)
    try:
        yield conn
    finally:
        await conn.close()


class _Base(DeclarativeBase):
    pass


class _Order(_Base):
    """An application's table whose migration has not run (``note`` is not there yet)."""

    __tablename__ = "app_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    note: Mapped[str] = mapped_column()


BEHIND = (
    "the venturi schema 'venturi' is at version {version}, this venturi needs {latest}: "
    "run `venturi schema apply --schema venturi --dsn <DSN>`"
)


@pytest.fixture
def job_task(kinds: list[str]) -> venturi.Task[Any]:
    @venturi.task("schema_errors_job")
    async def handler(ctx: venturi.Context[Any], carry: dict[str, int]) -> None:
        return None

    return handler


@pytest.mark.parametrize("schema", ["venturi", "other"])
async def test_enqueue_without_the_schema(
    bare: asyncpg.Connection, job_task: venturi.Task[Any], schema: str
) -> None:
    with pytest.raises(SchemaError) as raised:
        await job_task.enqueue(bare, {"n": 1}, schema=schema)
    assert str(raised.value) == NOT_APPLIED.format(schema=schema)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


async def test_keyed_enqueue_without_the_schema(
    bare: asyncpg.Connection, job_task: venturi.Task[Any]
) -> None:
    with pytest.raises(SchemaError, match="venturi schema apply"):
        await job_task.enqueue(bare, {"n": 1}, key="k")


@pytest.mark.parametrize("keyed", [False, True])
async def test_enqueue_many_without_the_schema(
    bare: asyncpg.Connection, job_task: venturi.Task[Any], keyed: bool
) -> None:
    jobs = [job_task.job({"n": i}, key=f"k{i}" if keyed else None) for i in range(3)]
    with pytest.raises(SchemaError) as raised:
        await venturi.enqueue_many(bare, jobs)
    assert str(raised.value) == NOT_APPLIED.format(schema="venturi")


async def test_reads_without_the_schema(bare: asyncpg.Connection) -> None:
    for read in (venturi.get_job, venturi.get_journal):
        with pytest.raises(SchemaError) as raised:
            await read(bare, 1)
        assert str(raised.value) == NOT_APPLIED.format(schema="venturi")


async def test_enqueue_in_a_transaction_without_the_schema(
    bare: asyncpg.Connection, job_task: venturi.Task[Any]
) -> None:
    # The caller's transaction is aborted by the failed statement; the error is still
    # venturi's, and the caller's rollback leaves the connection usable.
    with pytest.raises(SchemaError):
        async with bare.transaction():
            await job_task.enqueue(bare, {"n": 1})
    assert await bare.fetchval("SELECT 1") == 1


# --- a database an older venturi applied (the application upgraded first) -------------


@pytest.fixture
async def at_18(empty_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A database at migration 18: before groups (19) added jobs.grp."""
    conn = await asyncpg.connect(empty_dsn)
    try:
        await migrated_to(conn, 18)
        yield conn
    finally:
        await conn.close()


@pytest.mark.parametrize("group", [None, "acme"])
async def test_enqueue_on_an_older_schema_says_what_to_run(
    at_18: asyncpg.Connection, job_task: venturi.Task[Any], group: str | None
) -> None:
    # The insert names jobs.grp, for a job without a group too: asyncpg's
    # UndefinedColumnError before, where the worker and the CLI say what to run.
    with pytest.raises(SchemaError) as raised:
        await job_task.enqueue(at_18, {"n": 1}, group=group)
    assert str(raised.value) == BEHIND.format(version=18, latest=sql.latest_migration())
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


async def test_enqueue_many_and_reads_on_an_older_schema_say_what_to_run(
    at_18: asyncpg.Connection, job_task: venturi.Task[Any]
) -> None:
    expected = BEHIND.format(version=18, latest=sql.latest_migration())
    with pytest.raises(SchemaError) as raised:
        await venturi.enqueue_many(at_18, [job_task.job({"n": i}) for i in range(3)])
    assert str(raised.value) == expected
    for read in (venturi.get_job, venturi.get_journal):
        with pytest.raises(SchemaError) as raised:
            await read(at_18, 1)
        assert str(raised.value) == expected
    # A table of a later migration (groups, 19): "not applied" before, the version now.
    with pytest.raises(SchemaError) as raised:
        await venturi.set_group(at_18, "schema_errors_job", "acme", cap=2)
    assert str(raised.value) == expected


async def test_a_copied_batch_on_an_older_schema_says_what_to_run(
    at_18: asyncpg.Connection, job_task: venturi.Task[Any]
) -> None:
    # A batch this large goes by binary COPY (job_copy_in), which names jobs.grp too.
    jobs = [job_task.job({"n": i}) for i in range(COPY_MIN_ROWS)]
    with pytest.raises(SchemaError) as raised:
        await venturi.enqueue_many(at_18, jobs)
    assert str(raised.value) == BEHIND.format(version=18, latest=sql.latest_migration())


async def test_enqueue_in_a_transaction_on_an_older_schema_says_what_to_run(
    at_18: asyncpg.Connection, job_task: venturi.Task[Any]
) -> None:
    # The failed insert aborted the caller's transaction: the version cannot be read in
    # it, and the error says what to run all the same.
    with pytest.raises(SchemaError, match=r"may be older than this venturi needs \(version \d+\)"):
        async with at_18.transaction():
            await job_task.enqueue(at_18, {"n": 1})
    assert await at_18.fetchval("SELECT 1") == 1


def test_sync_enqueue_on_an_older_schema_says_what_to_run(
    at_18: asyncpg.Connection, empty_dsn: str, job_task: venturi.Task[Any]
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as c:
        with pytest.raises(SchemaError) as raised:
            job_task.enqueue_sync(c, {"n": 1})
    assert str(raised.value) == BEHIND.format(version=18, latest=sql.latest_migration())


async def test_a_migration_that_fails_says_its_own_error(bare: asyncpg.Connection) -> None:
    # The apply's own statements went through the same reading: a migration failing for
    # want of a column said "at version 25, ... needs 26: run `venturi schema apply`",
    # the command that had just failed, and hid the column it wanted.
    await migrated_to(bare, 25)
    # Test-side write: a database that differs from what its version says.
    await bare.execute("ALTER TABLE venturi.groups DROP COLUMN ready")
    with pytest.raises(asyncpg.UndefinedColumnError, match='column "ready" does not exist'):
        await db.schema.apply_schema(bare, schema="venturi")


def test_an_applications_own_error_is_not_the_schema_behind(
    empty_dsn: str, job_task: venturi.Task[Any]
) -> None:
    # The application's flush failed on its own missing column (its migration not run
    # yet); an enqueue in the except block on the same session failed as the session's
    # transaction had, and the reading found the application's error in the context of
    # that failure: "the venturi schema is older than this venturi needs", on a schema
    # that is current, the session's own error hidden.
    url = empty_dsn.replace("postgresql://", "postgresql+psycopg://")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as c:
            db.schema.apply_schema_sync(c.connection.driver_connection, schema="venturi")
            c.execute(sa.text("CREATE TABLE app_orders (id serial PRIMARY KEY)"))
        with Session(engine) as session:
            session.add(_Order(note="x"))
            try:
                session.flush()
            except sa.exc.ProgrammingError:
                with pytest.raises(sa.exc.SQLAlchemyError) as raised:
                    job_task.enqueue_sync(session, {"n": 1})
                assert not isinstance(raised.value, SchemaError)
    finally:
        engine.dispose()


async def test_set_group_in_a_transaction_on_an_older_schema_does_not_say_not_applied(
    at_18: asyncpg.Connection,
) -> None:
    # The groups table (migration 19) is missing at version 18; in the caller's aborted
    # transaction the version cannot be read, and the error said the schema was "not
    # applied" of an applied one.
    with pytest.raises(SchemaError) as raised:
        async with at_18.transaction():
            await venturi.set_group(at_18, "k", "acme", cap=1)
    said = str(raised.value)
    assert "not applied to this database" not in said and "may be older" in said, said
