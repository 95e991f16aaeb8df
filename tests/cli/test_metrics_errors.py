"""`venturi metrics` refused by its configuration: one line, exit 2, never a traceback."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.support import assert_one_clean_error, venturi_cli_async
from tests.support.ports import free_port
from tests.support.sql import statement as tsql

MONITOR = "venturi_test_monitor"  # role_monitor_no_workers.sql.j2's role


async def test_a_role_that_may_not_read_the_workers_is_one_line(
    dsn: str, conn: asyncpg.Connection
) -> None:
    await conn.execute(tsql("role_monitor_no_workers"))
    url = urlsplit(dsn)
    assert url.username is not None
    monitor = urlunsplit(url._replace(netloc=url.netloc.replace(url.username, MONITOR, 1)))
    # Its first read was a 66-line traceback, exit 1.
    out = await venturi_cli_async("metrics", "--port", str(free_port()), dsn=monitor)
    assert_one_clean_error(out, "permission denied for table workers")
