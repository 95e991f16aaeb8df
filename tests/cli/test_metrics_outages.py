"""`venturi metrics` while its database does not answer: a read that outlasts its bound
is given up (venturi_queue_up 0, the connection dropped, a new one next time), and a
signal stops the exporter at once, a read stuck or not; started in an outage, it serves
up 0 and retries. The silent server is the chaos harness's proxy black-holing the
exporter's connections (tests/chaos/proxy.py); the down one a throwaway cluster stopped."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import asyncpg
import pytest

from tests.chaos.proxy import Proxy
from tests.support import wait_for
from tests.support.exporter import scrape_when, spawn_exporter
from tests.support.ports import free_port
from venturi import db, testing
from venturi.cli import ops


def _sent_or_opened(proxy: Proxy, chunks: dict[int, int]) -> bool:
    """Has the exporter begun a read since ``chunks`` (each link's chunks sent then): a
    statement on a link it had, or a new link (a connect)?"""
    return any(link.stats.chunks_up > chunks.get(link.n, -1) for link in proxy.links)


async def test_a_silent_server_reads_as_down_and_a_signal_stops_at_once(
    proxy: Proxy, dsn: str
) -> None:
    port = free_port()
    proc = spawn_exporter(proxy.dsn(dsn), port)
    try:
        await scrape_when(port, "venturi_queue_up 1.0")
        # The read stuck on the black-holed connection kept up at 1 for good.
        proxy.blackhole()
        await scrape_when(port, "venturi_queue_up 0.0", within=ops.READ_BOUND_MIN + 30)
        proxy.restore()
        await scrape_when(port, "venturi_queue_up 1.0")
        proxy.blackhole()
        chunks = {link.n: link.stats.chunks_up for link in proxy.links}

        async def reading() -> bool:
            return _sent_or_opened(proxy, chunks)

        await wait_for(reading, within=30)
        # A read is stuck now; SIGTERM waited for the server to answer again.
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=ops.READ_BOUND_MIN)
    finally:
        if proc.poll() is None:
            proc.kill()
        await asyncio.to_thread(proc.wait)
    assert proc.returncode == 0, out
    assert "the database did not answer within" in out and "Traceback" not in out
    assert out.rstrip().endswith("metrics exporter stopped"), out


@pytest.fixture
def cluster() -> Iterator[testing.Cluster]:
    c = testing.start_cluster()
    if c is None:
        pytest.skip("no PostgreSQL binaries on this machine to start a throwaway cluster")
    yield c
    c.destroy()


# Serial: a cluster of its own, stopped under the exporter and started again.
@pytest.mark.serial
async def test_started_while_the_database_is_down_it_serves_down_and_retries(
    cluster: testing.Cluster,
) -> None:
    conn = await asyncpg.connect(cluster.dsn)
    try:
        await db.schema.apply_schema(conn, schema="venturi")
    finally:
        await conn.close()
    await asyncio.to_thread(cluster.stop)
    port = free_port()
    proc = spawn_exporter(cluster.dsn, port)
    try:
        # It exited 2 after its first connect failed: nothing served in an outage.
        await scrape_when(port, "venturi_queue_up 0.0")
        await asyncio.to_thread(cluster.start)
        await scrape_when(port, "venturi_queue_up 1.0")
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        await asyncio.to_thread(proc.wait)
    assert proc.returncode == 0, out
    assert "reading the queue failed (retrying): cannot connect to" in out, out
    assert "Traceback" not in out
