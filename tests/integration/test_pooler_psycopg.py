"""psycopg 3 and SQLAlchemy over psycopg behind PgBouncer in transaction pooling mode:
psycopg prepares a statement it ran five times on a connection (``prepare_threshold``)
on the server connection it is on, and a later run lands on another, where the name is
missing or another client's. Connected with ``prepare_threshold=None`` (docs/worker.md,
"Behind a transaction pooler"), every enqueue goes through."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
import msgspec
import psycopg
import pytest
import sqlalchemy.ext.asyncio

import venturi
from tests.support import pgbouncer

# Serial (tests/support/alone.py), as tests/integration/test_pooler.py: a PgBouncer of
# its own with two server connections that six clients share.
pytestmark = [
    pytest.mark.skipif(
        pgbouncer.binary() is None, reason="pgbouncer is not installed (.ci/run installs it)"
    ),
    pytest.mark.serial,
]

CLIENTS, ENQUEUES = 6, 20
PREPARED = (psycopg.errors.DuplicatePreparedStatement, psycopg.errors.InvalidSqlStatementName)


class Mark(msgspec.Struct):
    n: int


@pytest.fixture(scope="module")
def bouncer(pg_admin_dsn: str) -> Iterator[pgbouncer.PgBouncer]:
    with pgbouncer.running(pg_admin_dsn, pool_size=2) as b:
        yield b


@pytest.fixture
def task(kinds: list[str]) -> venturi.Task[Mark]:
    @venturi.task(kind="pooled_psycopg")
    async def mark(ctx: venturi.Context[Any], carry: Mark) -> None:
        return None

    return mark


async def _jobs(dsn: str, prefix: str) -> int:
    """The jobs whose key starts with ``prefix``."""
    conn = await asyncpg.connect(dsn)
    try:
        jobs = await venturi.admin.list_jobs(conn, kind="pooled_psycopg", limit=1000)
    finally:
        await conn.close()
    return sum(1 for j in jobs if (j.key or "").startswith(prefix))


async def _clients(enqueue: Any) -> list[BaseException | None]:
    """CLIENTS clients of ENQUEUES enqueues each, interleaved; each one's first error."""

    async def client(i: int) -> None:
        for n in range(ENQUEUES):
            await enqueue(i, n)
            await asyncio.sleep(0)  # stays: a yield, so the clients interleave

    return await asyncio.gather(*(client(i) for i in range(CLIENTS)), return_exceptions=True)


async def _psycopg(target: str, task: venturi.Task[Mark], prefix: str, **options: Any) -> list[Any]:
    conns = [
        await psycopg.AsyncConnection.connect(target, autocommit=True, **options)
        for _ in range(CLIENTS)
    ]
    try:
        return await _clients(lambda i, n: task.enqueue(conns[i], Mark(n), key=f"{prefix}{i}-{n}"))
    finally:
        for c in conns:
            await c.close()


async def test_psycopg_prepares_behind_the_pooler_unless_told_not_to(
    dsn: str, bouncer: pgbouncer.PgBouncer, task: venturi.Task[Mark]
) -> None:
    target = bouncer.through(dsn, mark=False)
    outcomes = await _psycopg(target, task, "default")
    assert any(isinstance(o, PREPARED) for o in outcomes), outcomes
    # As docs/worker.md says: no prepared statements, and every enqueue goes through.
    assert await _psycopg(target, task, "unprepared", prepare_threshold=None) == [None] * CLIENTS
    assert await _jobs(dsn, "unprepared") == CLIENTS * ENQUEUES


async def test_sqlalchemy_over_psycopg_behind_the_pooler_with_prepare_threshold_none(
    dsn: str, bouncer: pgbouncer.PgBouncer, task: venturi.Task[Mark]
) -> None:
    url = bouncer.through(dsn, mark=False).replace("postgresql://", "postgresql+psycopg://")
    engines = [
        sqlalchemy.ext.asyncio.create_async_engine(
            url, pool_size=1, connect_args={"prepare_threshold": None}
        )
        for _ in range(CLIENTS)
    ]

    async def enqueue(i: int, n: int) -> None:
        async with engines[i].begin() as conn:
            await task.enqueue(conn, Mark(n), key=f"s{i}-{n}")

    try:
        assert await _clients(enqueue) == [None] * CLIENTS
        assert await _jobs(dsn, "s") == CLIENTS * ENQUEUES
    finally:
        for e in engines:
            await e.dispose()
