"""The chaos proxy against the real server: pass, black-hole, reset, drop, delay."""

from __future__ import annotations

import asyncio
import time
import urllib.parse

import asyncpg
import pytest

from tests.chaos.proxy import Proxy
from tests.support import sql as pgsql

# What a client sees when the proxy cuts its connection under a statement.
LINK_ERRORS = (ConnectionError, OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError)


async def _connect(proxy: Proxy, dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(proxy.dsn(dsn), timeout=10)


async def test_a_query_through_the_proxy_works(proxy: Proxy, pg_admin_dsn: str) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    try:
        assert await conn.fetchval(pgsql.statement("server_port")) == str(
            urllib.parse.urlsplit(pg_admin_dsn).port or 5432
        )
    finally:
        await conn.close()
    assert proxy.links and proxy.links[0].stats.chunks_up > 0
    assert proxy.port != (urllib.parse.urlsplit(pg_admin_dsn).port or 5432)


async def test_blackhole_makes_a_query_hang_and_restore_lets_it_answer(
    proxy: Proxy, pg_admin_dsn: str
) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    try:
        proxy.blackhole()
        query = asyncio.ensure_future(conn.fetchval(pgsql.statement("server_port")))
        done, _ = await asyncio.wait([query], timeout=1.5)
        assert not done, "a query answered through a black-holed connection"
        link = proxy.links[0]
        assert link.is_open and link.blackholed_at is not None
        # The bytes were held, not lost: once the flow is back the query answers.
        proxy.restore()
        assert await asyncio.wait_for(query, 10) is not None
    finally:
        conn.terminate()


async def test_blackhole_of_open_links_only_lets_new_connections_pass(
    proxy: Proxy, pg_admin_dsn: str
) -> None:
    old = await _connect(proxy, pg_admin_dsn)
    try:
        proxy.blackhole(new=False)
        new = await _connect(proxy, pg_admin_dsn)
        try:
            assert await new.fetchval(pgsql.statement("server_port"))
        finally:
            await new.close()
        assert proxy.links[0].mode == "blackhole" and proxy.links[1].mode == "pass"
    finally:
        old.terminate()


async def test_reset_makes_the_client_see_a_connection_error(
    proxy: Proxy, pg_admin_dsn: str
) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    try:
        assert proxy.reset() == 1
        with pytest.raises(LINK_ERRORS):
            await asyncio.wait_for(conn.fetchval(pgsql.statement("server_port")), 10)
        assert proxy.links[0].closed_by == "proxy"
    finally:
        conn.terminate()


async def test_drop_closes_the_connection(proxy: Proxy, pg_admin_dsn: str) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    try:
        assert proxy.drop() == 1
        with pytest.raises(LINK_ERRORS):
            await asyncio.wait_for(conn.fetchval(pgsql.statement("server_port")), 10)
    finally:
        conn.terminate()


async def test_a_client_closing_a_link_is_recorded(proxy: Proxy, pg_admin_dsn: str) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    # Dropped without a goodbye (no Terminate message): the server has no reason to close
    # first, so the proxy sees the client's side go.
    conn.terminate()
    link = proxy.links[0]
    await asyncio.wait_for(link.ended.wait(), 10)
    assert link.closed_by == "client"


async def test_delay_adds_latency(proxy: Proxy, pg_admin_dsn: str) -> None:
    conn = await _connect(proxy, pg_admin_dsn)
    try:
        proxy.delay(0.3)
        start = time.monotonic()
        await conn.fetchval(pgsql.statement("server_port"))
        assert time.monotonic() - start >= 0.3
        proxy.delay((0.2, 0.25))
        start = time.monotonic()
        await conn.fetchval(pgsql.statement("server_port"))
        assert time.monotonic() - start >= 0.2
    finally:
        await conn.close()
