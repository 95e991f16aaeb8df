"""Enqueue and read back through every driver and style an application may hold, against a
real database: asyncpg, psycopg 3 (connections and pools, sync and async), psycopg2 and
SQLAlchemy 2 (Connection, Session, Engine, AsyncConnection, AsyncSession, over psycopg,
psycopg2 and asyncpg). Django's connection has its own module (a configured settings
module in a subprocess: tests/integration/test_django.py).

Each stack is a ``Stack`` (tests/support/stacks.py): how to open it, how the application
opens and ends its own transaction on it, and venturi's calls on it. One test body per
behaviour runs on all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import asyncpg
import msgspec
import psycopg
import psycopg2
import psycopg2.extensions
import pytest
import sqlalchemy
import sqlalchemy.orm

import venturi
from tests.support import sql as tsql
from tests.support.carries import Item
from tests.support.schemas import migrated_to
from tests.support.stacks import STACKS, WITH_TRANSACTION, Psycopg2, PsycopgSync, Stack, opened
from tests.support.waits import wait_for, wait_stat, wait_until, waits_on_a_lock
from tests.support.workers import running
from venturi import Context, Worker, admin, db, sql, testing


class Wrong:
    """Not the carry type of any task here."""


@pytest.fixture(params=STACKS, ids=lambda s: s.name)
async def stack(request: Any, dsn: str) -> AsyncIterator[Stack]:
    async with opened(request.param(dsn)) as s:
        yield s


@pytest.fixture(params=WITH_TRANSACTION, ids=lambda s: s.name)
async def tx_stack(request: Any, dsn: str) -> AsyncIterator[Stack]:
    async with opened(request.param(dsn)) as s:
        yield s


@pytest.fixture
def work(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task("drv_work")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def _exists(conn: asyncpg.Connection, job_id: int) -> bool:
    return await venturi.get_job(conn, job_id) is not None


async def test_rollback_writes_nothing(
    tx_stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    async with tx_stack.transaction(commit=False):
        job_id = await tx_stack.enqueue(work, Item(1))
        [many] = await tx_stack.enqueue_many([work.job(Item(2), key="k")])
        # Inside the caller's transaction the job is there for the caller...
        assert (await tx_stack.get_job(job_id)) is not None
        # ...and for nobody else yet.
        assert not await _exists(conn, job_id)
    assert not await _exists(conn, job_id)
    assert not await _exists(conn, many)
    assert await tx_stack.get_job(job_id) is None


async def test_commit_then_a_worker_runs_it(
    tx_stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    async with tx_stack.transaction(commit=True):
        job_id = await tx_stack.enqueue(work, Item(1))
        assert not await _exists(conn, job_id)
    assert await _exists(conn, job_id)
    ran = await testing.drain(conn, [work])
    assert ran[job_id].status == "completed"
    job = await tx_stack.get_job(job_id)
    assert job is not None and job.status == "completed" and job.carry == {"n": 1}
    events = [e.event for e in await tx_stack.get_journal(job_id)]
    assert events == ["enqueued", "claimed", "completed"]


async def test_the_job_commits_and_rolls_back_with_the_applications_write(
    dsn: str, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    """The implicit transaction a psycopg or psycopg2 write opens is the one the job
    joins: the row and the job commit together or not at all."""
    await conn.execute(tsql.statement("app_orders_create"))
    for cls in (PsycopgSync, Psycopg2):
        s = cls(dsn)
        await s.open()
        try:
            for commit in (False, True):
                before = await conn.fetchval(tsql.statement("app_order_count"))
                async with s.transaction(commit=commit):
                    job_id = await s.enqueue(work, Item(1))
                after = await conn.fetchval(tsql.statement("app_order_count"))
                assert (after - before, await _exists(conn, job_id)) == (
                    (1, True) if commit else (0, False)
                ), (cls.name, commit)
        finally:
            await s.close()


async def test_groups_through_every_driver(
    tx_stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    """SPEC 13 on the application's own stack: a job's group on enqueue and enqueue_many,
    and ``set_group`` (``set_group_sync`` on a sync driver) in the caller's transaction,
    which commits or rolls back with it."""
    set_group = venturi.set_group_sync if tx_stack.sync else venturi.set_group
    # No field given is an error, as `venturi groups set` without an option is: it wrote
    # a row of defaults for a group never seen.
    with pytest.raises(venturi.ConfigError, match="nothing to set"):
        await tx_stack.call(set_group, tx_stack.native, "drv_work", "empty")
    assert await admin.show_group(conn, "drv_work", "empty") is None
    async with tx_stack.transaction(commit=False):
        await tx_stack.call(set_group, tx_stack.native, "drv_work", "gone", weight=2)
    assert await admin.show_group(conn, "drv_work", "gone") is None
    async with tx_stack.transaction(commit=True):
        one = await tx_stack.enqueue(work, Item(1), group="acme")
        [many] = await tx_stack.enqueue_many([work.job(Item(2), group="globex")])
        settings = await tx_stack.call(
            set_group, tx_stack.native, "drv_work", "acme", cap=2, weight=3, paused=True
        )
    assert (settings.cap, settings.weight, settings.paused) == (2, 3.0, True)
    for job_id, group in ((one, "acme"), (many, "globex")):
        job = await tx_stack.get_job(job_id)
        assert job is not None and job.group == group
    state = await admin.show_group(conn, "drv_work", "acme")
    assert state is not None and (state.pending, state.cap, state.paused) == (1, 2, True)
    # None returns a field to the task's default, outside a transaction too.
    settings = await tx_stack.call(set_group, tx_stack.native, "drv_work", "acme", paused=None)
    assert (settings.cap, settings.paused) == (2, False)


async def test_without_a_transaction_it_commits_on_its_own(
    stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    job_id = await stack.enqueue(work, Item(1))
    ids = await stack.enqueue_many([work.job(Item(2)), work.job(Item(3), key="a")])
    for i in (job_id, *ids):
        assert await _exists(conn, i)
    if isinstance(stack.native, psycopg.Connection | psycopg.AsyncConnection):
        # Nothing left open on the application's connection.
        assert stack.native.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    if isinstance(stack.native, psycopg2.extensions.connection):
        assert stack.native.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE


async def test_wrong_carry_is_a_type_error_before_any_write(
    stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    with pytest.raises(TypeError, match="drv_work"):
        await stack.enqueue(work, Wrong())
    with pytest.raises(TypeError):
        await stack.enqueue_many([work.job(Item(1)), Wrong()])
    with pytest.raises(TypeError):
        await stack.enqueue_many([work.job(Wrong())])  # type: ignore[arg-type]
    assert await conn.fetchval(tsql.statement("jobs_count")) == 0
    # The connection was not touched: it still works, with no transaction left open.
    await stack.enqueue(work, Item(1))
    assert await conn.fetchval(tsql.statement("jobs_count")) == 1


async def test_a_key_taken_through_one_driver_is_the_same_job_through_another(
    stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    mine = await stack.enqueue(work, Item(1), key="mine")
    assert await work.enqueue(conn, Item(2), key="mine") == mine
    theirs = await work.enqueue(conn, Item(3), key="theirs")
    assert await stack.enqueue(work, Item(4), key="theirs") == theirs
    got = await stack.enqueue_many(
        [work.job(Item(5), key="theirs"), work.job(Item(6), key="new"), work.job(Item(7))]
    )
    assert got[0] == theirs and len({mine, *got}) == 4
    assert await work.enqueue(conn, Item(8), key="new") == got[1]


async def test_a_holder_that_commits_after_the_snapshot_gives_its_id(
    stack: Stack, dsn: str, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    """The key's holder commits while this driver's insert waits on it: the insert's
    snapshot misses the holder, so it runs again and returns the holder's id."""
    for many in (False, True):
        key = f"held-{many}"
        holder = await asyncpg.connect(dsn)
        try:
            tx = holder.transaction()
            await tx.start()
            held = await work.enqueue(holder, Item(1), key=key)
            waiting: asyncio.Future[Any]
            if many:
                waiting = asyncio.ensure_future(stack.enqueue_many([work.job(Item(2), key=key)]))
            else:
                waiting = asyncio.ensure_future(stack.enqueue(work, Item(2), key=key))
            await wait_for(lambda: _waits_on_a_lock(conn))
            assert not waiting.done()
            await tx.commit()
            got = await asyncio.wait_for(waiting, 30)
            assert got == ([held] if many else held)
        finally:
            await holder.close()


async def _waits_on_a_lock(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval(tsql.statement("backends_waiting_on_a_lock")))


async def test_the_notification_wakes_an_idle_worker(
    stack: Stack, dsn: str, kinds: list[str]
) -> None:
    ran = asyncio.Event()

    @venturi.task("drv_notify")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        ran.set()

    # An idle worker polls every 60 s: only the notification can wake it within the wait.
    worker = Worker(None, dsn, [handler], poll_max=60)
    async with running(worker):
        await wait_until(lambda: worker.listening)
        await wait_stat(worker, "empty_claims", 1)
        await stack.enqueue(handler, Item(1))
        await asyncio.wait_for(ran.wait(), 20)


async def test_a_schema_not_applied_says_what_to_run(
    empty_dsn: str, work: venturi.Task[Item]
) -> None:
    for cls in STACKS:
        s = cls(empty_dsn)
        await s.open()
        try:
            with pytest.raises(venturi.SchemaError, match="venturi schema apply"):
                await s.enqueue(work, Item(1))
            with pytest.raises(venturi.SchemaError, match="venturi schema apply"):
                await s.get_job(1)
        finally:
            await s.close()


async def test_a_sync_connection_in_the_async_call_says_which_to_use(
    dsn: str, work: venturi.Task[Item]
) -> None:
    sync: psycopg.Connection[Any] = await asyncio.to_thread(lambda: psycopg.connect(dsn))
    try:
        with pytest.raises(TypeError, match="enqueue_sync"):
            await work.enqueue(sync, Item(1))  # type: ignore[arg-type]
    finally:
        sync.close()
    async_conn = await psycopg.AsyncConnection.connect(dsn)
    try:
        with pytest.raises(TypeError, match="await"):
            work.enqueue_sync(async_conn, Item(1))  # type: ignore[arg-type]
    finally:
        await async_conn.close()
    with pytest.raises(TypeError, match="venturi takes"):
        work.enqueue_sync(object(), Item(1))  # type: ignore[arg-type]
    sqlite = sqlalchemy.create_engine("sqlite://")
    try:
        with pytest.raises(TypeError, match="needs PostgreSQL"):
            work.enqueue_sync(sqlite, Item(1))
    finally:
        # The engine's pool keeps the connection the refused call opened; Python 3.13 warns
        # (ResourceWarning, an error here) when an open sqlite3 connection is collected.
        sqlite.dispose()


async def test_the_schema_applies_through_a_sync_driver(
    empty_dsn: str, work: venturi.Task[Item]
) -> None:
    """What the Django app's migration runs: venturi's own migrate-to-latest, on the
    application's connection, in a transaction of its own or the caller's."""
    latest = sql.migrations()[-1].version
    with psycopg.connect(empty_dsn) as c:
        applied = await asyncio.to_thread(db.schema.apply_schema_sync, c, schema="venturi")
        assert applied == [m.version for m in sql.migrations()]
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    p2 = psycopg2.connect(empty_dsn)
    try:
        # An idle psycopg2 connection: a transaction of venturi's own, committed.
        assert db.schema.apply_schema_sync(p2, schema="venturi") == []
        assert work.enqueue_sync(p2, Item(1)) > 0
        assert p2.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE
        # In the caller's transaction (psycopg2 opened it at the first statement): left
        # open for the caller, whose rollback undoes the enqueue.
        with p2.cursor() as cur:
            cur.execute(tsql.statement("jobs_count"))
            assert cur.fetchone() == (1,)
        assert db.schema.apply_schema_sync(p2, schema="venturi") == []
        assert work.enqueue_sync(p2, Item(2)) > 0
        assert p2.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INTRANS
        p2.rollback()
    finally:
        p2.close()
    c2 = await asyncpg.connect(empty_dsn)
    try:
        assert await db.schema.schema_version(c2, schema="venturi") == latest
        assert await c2.fetchval(tsql.statement("jobs_count")) == 1  # the first one only
    finally:
        await c2.close()


async def test_a_sync_apply_in_the_callers_transaction_outwaits_a_lock_and_leaves_its_setting(
    empty_dsn: str, work: venturi.Task[Item]
) -> None:
    """Django's migrate: the apply runs in a savepoint of the caller's transaction. An
    attempt that waited its lock_timeout rolls back to the savepoint (the caller's
    transaction stays usable); the next one, once the holder is done, applies; and the
    caller's own lock_timeout holds again after it."""
    setup, web = await asyncpg.connect(empty_dsn), await asyncpg.connect(empty_dsn)
    p2 = psycopg2.connect(empty_dsn)
    try:
        await migrated_to(setup, 23)
        with p2.cursor() as cur:
            cur.execute(
                sql.statement("maintenance/session_setting", style="pyformat"),
                sql.bind(("lock_timeout", "7s"), "pyformat"),
            )
            cur.execute(tsql.statement("jobs_count"))  # the caller's transaction opens
        request = web.transaction()
        await request.start()
        # An unkeyed batch: its statement writes only columns every version has (a keyed
        # job's writes unique_for, which migration 28 added).
        await venturi.enqueue_many(web, [work.job(Item(1))])
        applying = asyncio.create_task(
            asyncio.to_thread(db.schema.apply_schema_sync, p2, schema="venturi", lock_timeout=0.3)
        )
        pid = p2.get_backend_pid()
        await wait_for(lambda: waits_on_a_lock(setup, pid))
        await wait_for(lambda: _not(waits_on_a_lock(setup, pid)))  # the attempt gave up
        await request.commit()
        assert await applying == [m.version for m in sql.migrations() if m.version > 23]
        assert p2.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INTRANS
        with p2.cursor() as cur:
            cur.execute(tsql.statement("setting_lock_timeout"))
            assert cur.fetchone() == ("7s",)
        p2.commit()
        assert await db.schema.schema_version(setup, schema="venturi") == sql.latest_migration()
    finally:
        p2.close()
        await setup.close()
        await web.close()


async def _not(condition: Awaitable[bool]) -> bool:
    return not await condition


async def test_a_keyed_batch_that_fails_leaves_the_callers_transaction_usable(
    tx_stack: Stack, conn: asyncpg.Connection, work: venturi.Task[Item]
) -> None:
    """enqueue_many with keys runs in a savepoint inside the caller's transaction: a batch
    the server refuses is undone alone, and the caller's own work still commits."""
    good = work.job(Item(2), key="fine")
    # A row the table refuses (priority outside 0..2), past venturi's own checks.
    refused = msgspec.structs.replace(work.job(Item(3), key="bad"), priority=7)
    async with tx_stack.transaction(commit=True):
        before = await tx_stack.enqueue(work, Item(1))
        with pytest.raises(Exception, match="priority"):
            await tx_stack.enqueue_many([good, refused])
        after = await tx_stack.enqueue(work, Item(4))
    assert await _exists(conn, before) and await _exists(conn, after)
    assert await conn.fetchval(tsql.statement("jobs_count")) == 2
