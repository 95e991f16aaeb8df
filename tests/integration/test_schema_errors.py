"""The application's own calls on a database without venturi's schema: a ``SchemaError``
that says what to run, never asyncpg's ``UndefinedTableError``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

import venturi
from venturi import SchemaError

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
