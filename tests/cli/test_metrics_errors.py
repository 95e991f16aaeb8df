"""`venturi metrics` refused by its configuration: one line, exit 2, never a traceback."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.support import assert_one_clean_error, venturi_cli_async
from tests.support.ports import free_port
from tests.support.sql import statement as tsql

MONITOR = "venturi_test_monitor"  # role_monitor_no_workers.sql.j2's role


def _as_role(dsn: str, role: str) -> str:
    url = urlsplit(dsn)
    assert url.username is not None
    return urlunsplit(url._replace(netloc=url.netloc.replace(url.username, role, 1)))


async def test_a_role_that_may_not_read_the_workers_is_one_line(
    dsn: str, conn: asyncpg.Connection
) -> None:
    await conn.execute(tsql("role_monitor_no_workers"))
    monitor = _as_role(dsn, MONITOR)
    # Its first read was a 66-line traceback, exit 1.
    out = await venturi_cli_async("metrics", "--port", str(free_port()), dsn=monitor)
    assert_one_clean_error(out, "permission denied for table workers")


async def test_bad_configuration_is_one_line_though_an_outage_is_retried(
    dsn: str, empty_dsn: str
) -> None:
    # An outage at start is served as venturi_queue_up 0 and retried
    # (test_metrics_outages.py); what no retry mends still ends the exporter at once.
    port = str(free_port())
    out = await venturi_cli_async("metrics", "--port", port, dsn=empty_dsn)
    assert_one_clean_error(out, "the venturi schema 'venturi' is not applied")
    nobody = _as_role(dsn, "venturi_test_no_such_role")
    out = await venturi_cli_async("metrics", "--port", port, dsn=nobody)
    assert_one_clean_error(out, 'role "venturi_test_no_such_role" does not exist')
    out = await venturi_cli_async("metrics", "--port", port, dsn="not-a-dsn")
    assert_one_clean_error(out, "invalid DSN")
