"""Connections that stay open while nothing answers (a black-holed network, a frozen
pooler or server): every statement has a deadline, the LISTEN connection is probed, the
worker reconnects and loses nothing, and a shutdown does not wait on a stuck statement.

The faults come from the chaos harness's TCP proxy (tests/chaos/proxy.py), between the
worker and the real server; the test's own connection stays direct.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

import asyncpg
import pytest

import venturi
from tests.chaos.proxy import Proxy
from tests.support import Item, running, wait_for, wait_stat, wait_status, wait_until
from tests.support import sql as test_sql
from venturi import Context, Worker, db
from venturi.runtime.instruments import Instruments
from venturi.runtime.listener import Listener


def _sent_since(proxy: Proxy, before: dict[int, int]) -> bool:
    """Has a client sent anything on a link since ``before`` (chunks up per link)? A
    black-holed link reads the first chunk and then holds it."""
    return any(link.stats.chunks_up > before.get(link.n, 0) for link in proxy.links)


def _chunks(proxy: Proxy) -> dict[int, int]:
    return {link.n: link.stats.chunks_up for link in proxy.links}


@contextlib.asynccontextmanager
async def _held(proxy: Proxy, dsn: str, deadline: float) -> AsyncIterator[db.held.Held]:
    """A ``Held`` connection with ``deadline`` of a worker pool that reaches the server
    through ``proxy``."""
    pool = await db.connect.create_worker_pool(proxy.dsn(dsn), min_size=0, max_size=2)
    try:
        yield db.held.Held(pool, deadline=deadline)
    finally:
        pool.terminate()


async def test_a_statement_on_a_black_holed_connection_ends_at_its_deadline(
    proxy: Proxy, dsn: str
) -> None:
    async with _held(proxy, dsn, 0.5) as held:
        assert await db.health.connection_probe(held)
        stuck = held.conn._con  # the pool's connection behind its proxy object
        proxy.blackhole(new=False)  # the links open now; new connections pass
        with pytest.raises(TimeoutError):
            await db.health.connection_probe(held)
        assert held.conn is None and stuck.is_closed()  # closed, not handed back
        assert await db.health.connection_probe(held)  # on a new connection
        assert cast(Any, held).conn._con is not stuck  # a new connection (narrowed above)


async def test_a_statement_cut_at_its_deadline_is_cancelled_on_the_server(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # The cut statement's connection was terminated with asyncpg's cancel request not yet
    # sent (a terminate drops it): the server ran the statement on, and a claim waiting
    # on a lock (a kind's cap lock; a caller's open transaction) committed its claim
    # after the worker had given it up, its job claimed and run by no one until its
    # lease ended. The server now gets the cancel.
    pool = await db.connect.create_worker_pool(dsn, min_size=0, max_size=2)
    try:
        held = db.held.Held(pool, deadline=0.5)
        assert await db.health.connection_probe(held)
        pid = held.conn.get_server_pid()

        async def given_up() -> bool:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                pid,
            )
            return bool(waiting == 0)

        async with conn.transaction():
            await conn.execute(venturi.sql.statement("kind_cap_lock", "venturi"), "k")
            with pytest.raises(TimeoutError):
                await held.execute(venturi.sql.statement("kind_cap_lock", "venturi"), "k")
            await wait_for(given_up, within=10)  # while the lock is still held
    finally:
        pool.terminate()


async def test_a_connection_slower_to_open_than_a_statement_deadline_still_opens(
    proxy: Proxy, dsn: str
) -> None:
    # Every chunk a client sends waits 0.5 s: opening a connection takes two (1 s), its
    # first statement two more (prepare, execute). Each fits the 1.6 s deadline; the two
    # together do not. A worker whose connections were cut on a slow network must still
    # open new ones (the long soak found one that could not, for a minute).
    proxy.delay(0.5)
    async with _held(proxy, dsn, 1.6) as held:
        assert await db.health.connection_probe(held)
        assert proxy.reset() == 1  # cut it: a statement after that opens a new one
        with contextlib.suppress(*db.errors.TRANSIENT):
            await db.health.connection_probe(held)  # this one may meet the cut
        assert await db.health.connection_probe(held)
        assert len(proxy.links) == 2


async def test_after_a_deadline_passes_the_next_statement_gets_longer(
    proxy: Proxy, dsn: str
) -> None:
    # 0.5 s per chunk: a new connection's first statement (prepare, execute) takes 1 s,
    # past the 0.6 s deadline. With a fixed deadline every new connection's first
    # statement would be cut, for as long as the network stays slow (the long soak saw
    # a worker do nothing for seconds after a backend kill in its slow minute).
    proxy.delay(0.5)
    async with _held(proxy, dsn, 0.6) as held:
        with pytest.raises(TimeoutError):
            await db.health.connection_probe(held)
        assert await db.health.connection_probe(held)  # 1.2 s this time: it fits
        assert held._now == 0.6  # an answer restores the deadline


async def test_the_worker_pool_sets_tcp_keepalives(dsn: str) -> None:
    pool = await db.connect.create_worker_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            sock = conn._transport.get_extra_info("socket")
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_KEEPIDLE"):
                keepidle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
                assert keepidle == db.connect.KEEPALIVE_IDLE
            if hasattr(socket, "TCP_USER_TIMEOUT"):
                user_timeout = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
                assert user_timeout == db.connect.USER_TIMEOUT_MS
    finally:
        await pool.close()


async def test_transaction_deadlines_end_a_transaction_left_idle(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    ended = asyncio.Event()
    conn.add_termination_listener(lambda _c: ended.set())
    try:
        tx = conn.transaction()
        await tx.start()
        await db.health.transaction_deadlines(conn, schema="venturi", deadline=0.2)
        assert await conn.fetchval(test_sql.statement("setting_idle_in_transaction")) == "200ms"
        # The client goes quiet inside its transaction: the server ends the session.
        await asyncio.wait_for(ended.wait(), 10)
    finally:
        conn.terminate()
    # Only that transaction: a new session has the server's default.
    fresh = await asyncpg.connect(dsn)
    try:
        assert await fresh.fetchval(test_sql.statement("setting_idle_in_transaction")) == "0"
    finally:
        await fresh.close()


async def test_the_listener_probes_a_silent_connection_and_reconnects(
    proxy: Proxy, dsn: str
) -> None:
    pool = await asyncpg.create_pool(proxy.dsn(dsn), min_size=1, max_size=2)
    ups: list[bool] = []
    woken: list[str] = []
    inst = Instruments(False)
    listener = Listener(
        pool, "venturi_probe_test", woken.append, ups.append, inst, deadline=0.5, probe_after=0.3
    )
    try:
        await listener.start()
        await wait_until(lambda: ups == [True])
        proxy.blackhole(new=False)  # the LISTEN link freezes; a new one would pass
        await wait_until(lambda: inst.stats["listen_probe_failed"] >= 1)
        await wait_until(lambda: ups[-2:] == [False, True])  # dropped, then back
        assert listener.conn is not None and not listener.conn.is_closed()
        assert inst.stats["listen_reconnects"] >= 1
    finally:
        await listener.close()
        pool.terminate()


async def test_a_worker_on_black_holed_connections_reconnects_and_runs_the_rest(
    proxy: Proxy, dsn: str, conn: asyncpg.Connection
) -> None:
    ran: list[int] = []

    @venturi.task(kind="frozen_rest")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        ran.append(carry.n)

    worker = Worker(
        None, proxy.dsn(dsn), [handler], concurrency=2, poll_max=0.3, statement_timeout=1.0
    )
    async with running(worker):
        first = await handler.enqueue(conn, Item(1))
        await wait_status(conn, first, "completed")
        before = _chunks(proxy)
        proxy.blackhole(new=False)  # every connection the worker holds now
        await wait_until(lambda: _sent_since(proxy, before))  # its next statement is stuck
        await wait_stat(worker, "db_errors", 1)  # ... until its deadline
        second = await handler.enqueue(conn, Item(2))
        await wait_status(conn, second, "completed", within=30)
    assert sorted(ran) == [1, 2]
    events = [e.event for e in await venturi.get_journal(conn, second)]
    assert events.count("claimed") == 1, events  # ran once, nothing lost or doubled


async def test_shutdown_does_not_wait_on_a_statement_that_never_returns(
    proxy: Proxy, dsn: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    go = asyncio.Event()

    @venturi.task(kind="frozen_stop")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        await go.wait()

    # Stopping may take: the cut (1 s), the final settle (two deadlines and 1 s), the
    # orphan release and closing the LISTEN connection (a deadline each) and the pool
    # (2 s): 16 s, well under the bound below (loose: a loaded machine is slower; without
    # the cut and the bounds, run() never returns). The
    # log line shows the stuck iteration was cut rather than left to its deadline.
    worker = Worker(
        None,
        proxy.dsn(dsn),
        [handler],
        concurrency=1,
        poll_max=0.3,
        shutdown_timeout=0.5,
        statement_timeout=3,
    )
    shutdown = asyncio.Event()
    run = asyncio.create_task(worker.run(shutdown))
    try:
        # The job comes to a worker that is idle: its claim is then its loop's last
        # statement before the black-hole (a claim into a backlog may look at the table's
        # statistics right after, and that statement, caught in flight, timed out before
        # the shutdown came: nothing was left to cut).
        await wait_until(lambda: worker.listening)
        await wait_stat(worker, "empty_claims", 1)
        job = await handler.enqueue(conn, Item(1))
        await wait_until(lambda: worker.jobs_held() == 1)
        before = _chunks(proxy)
        proxy.blackhole()  # every link, new ones too: the database is unreachable
        go.set()  # the handler completes; writing that is stuck
        await wait_until(lambda: _sent_since(proxy, before))
        caplog.set_level(logging.WARNING, logger="venturi.worker")
        shutdown.set()
        await asyncio.wait_for(asyncio.shield(run), 90)
        # The outcome could not be written: the job is still claimed, for lease expiry.
        # (Checked before the proxy forwards again: it holds the statement the worker
        # sent into the black-hole, and would deliver it late.)
        assert (await venturi.get_job(conn, job)).status == "claimed"  # type: ignore[union-attr]
    finally:
        if not run.done():
            run.cancel()
        proxy.restore()
    assert "abandoning that statement to drain now" in caplog.text


def _releasing() -> bool:
    """Is one of asyncpg's own release tasks (behind its ``asyncio.shield``) running?"""
    return any(
        getattr(t.get_coro(), "__qualname__", "") == "PoolConnectionHolder.release"
        for t in asyncio.all_tasks()
    )


async def _cancelled_mid_reset(
    proxy: Proxy,
    pool: Any,
    give_back: Callable[[], Coroutine[Any, Any, None]],
    sent: list[dict[int, int]],
) -> list[str]:
    """Run ``give_back`` (which black-holes the link and records ``sent`` before its
    connection goes back) in a task, cancel the task once the pool's reset is on the
    wire, then close the pool under the reset: the errors the loop saw unobserved."""
    loop = asyncio.get_running_loop()
    unseen: list[str] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unseen.append(str(context["message"])))
    try:
        giving = asyncio.create_task(give_back())
        await wait_until(lambda: bool(sent) and _sent_since(proxy, sent[0]))
        giving.cancel()  # the caller stops (a worker's shutdown)
        with contextlib.suppress(asyncio.CancelledError):
            await giving
        assert _releasing()  # asyncpg's release task runs on
        pool.terminate()  # closes the connection under the reset: the reset fails
        await wait_until(lambda: not _releasing())
        del giving
        gc.collect()
        return unseen
    finally:
        loop.set_exception_handler(before)
        pool.terminate()
        proxy.restore()


async def test_a_release_whose_caller_is_cancelled_leaves_no_error_unseen(
    proxy: Proxy, dsn: str
) -> None:
    # A run stopped while its connection is given back (found by the chaos scenario
    # blackhole): the pool's reset goes on in a task of asyncpg's own, the connection then
    # breaks, and that task's error must not go unobserved to the log as a traceback.
    pool = await db.connect.create_worker_pool(proxy.dsn(dsn), min_size=0, max_size=1)
    conn = await pool.acquire()
    assert await conn.fetchval("SELECT 1") == 1
    sent = [_chunks(proxy)]
    proxy.blackhole(new=False)  # the reset will get no answer
    unseen = await _cancelled_mid_reset(
        proxy, pool, lambda: db.connect.release(pool, conn, within=60), sent
    )
    assert unseen == []


async def test_a_pooled_block_cancelled_in_its_release_leaves_no_error_unseen(
    proxy: Proxy, dsn: str
) -> None:
    # The maintenance tasks (cron, vacuum) and a transaction on a pool take a connection
    # with db.connect.pooled: the same release, when the block's task is cancelled as the
    # connection goes back.
    pool = await db.connect.create_worker_pool(proxy.dsn(dsn), min_size=0, max_size=1)
    sent: list[dict[int, int]] = []

    async def block() -> None:
        async with db.connect.pooled(pool) as conn:
            assert await conn.fetchval("SELECT 1") == 1
            sent.append(_chunks(proxy))
            proxy.blackhole(new=False)  # the reset will get no answer

    assert await _cancelled_mid_reset(proxy, pool, block, sent) == []
