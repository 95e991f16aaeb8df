"""The chaos failover's primary and synchronous standby: built, replicating, promoted,
and found by a multi-host DSN."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.chaos import standby
from tests.support import sql as pgsql

# Serial (tests/support/alone.py): two clusters of its own, a base backup, synchronous
# commits and a failover timed by what the machine can give them.
pytestmark = [
    pytest.mark.skipif(standby.missing_tools() is not None, reason=str(standby.missing_tools())),
    pytest.mark.serial,
]


async def _port_and_note(dsn: str, note: str) -> tuple[str, int]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await conn.fetchval(pgsql.statement("server_port")), await conn.fetchval(
            pgsql.statement("probe_count"), note
        )
    finally:
        await conn.close()


async def _write(dsn: str, note: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(pgsql.statement("probe_table_create"))
        await conn.execute(pgsql.statement("probe_write"), note)
    finally:
        await conn.close()


def test_a_standby_builds_replicates_synchronously_and_promotes() -> None:
    pair = standby.start_pair()
    try:
        # The multi-host DSN reaches the primary, whose commits wait for the standby.
        asyncio.run(_write(pair.dsn, "before"))
        port, n = asyncio.run(_port_and_note(pair.dsn, "before"))
        assert (port, n) == (str(pair.primary.port), 1)
        pair.fail_over()
        # The old primary is down for good, and went down before the standby took writes.
        assert pair.stopped is not None and pair.promoted is not None
        assert pair.stopped <= pair.promoted
        with pytest.raises(OSError):
            asyncio.run(_port_and_note(pair.primary.dsn, "before"))
        # The same DSN now reaches the promoted standby, with the committed row, writable.
        port, n = asyncio.run(_port_and_note(pair.dsn, "before"))
        assert (port, n) == (str(pair.standby.port), 1)
        asyncio.run(_write(pair.dsn, "after"))
        assert asyncio.run(_port_and_note(pair.dsn, "after"))[1] == 1
    finally:
        pair.destroy()
