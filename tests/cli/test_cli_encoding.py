"""The tables and messages on an output that is not UTF-8 (a Latin-1 or ASCII locale,
PYTHONIOENCODING): what the encoding cannot hold degrades, no traceback, a command that
succeeded exits 0. Real processes against a real database."""

from __future__ import annotations

import asyncpg
import pytest

from tests.support import venturi_cli_async
from venturi import JobSpec, enqueue_many

LATIN1 = {"PYTHONIOENCODING": "latin-1"}
# A C locale, Python left to it: stdout is ASCII.
ASCII = {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}


async def test_a_paused_kind_the_output_cannot_spell_is_escaped_not_a_crash(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # It used to commit the pause, then crash printing "paused snow_☃": exit 1 for a
    # change that was made. (Latin-1 only: in the C locale the argument itself arrives
    # undecodable, and is refused as such.)
    out = await venturi_cli_async("kinds", "pause", "snow_☃", dsn=dsn, env=LATIN1)
    assert (out.returncode, out.stdout) == (0, "paused snow_\\u2603\n"), out.stderr
    assert "Traceback" not in out.stderr and "snow_\\u2603" in out.stderr  # its warning
    assert await conn.fetchval("select kind from venturi.paused_kinds") == "snow_☃"
    for env in (LATIN1, ASCII):
        listed = await venturi_cli_async("kinds", "list", dsn=dsn, env=env)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        assert "snow_\\u2603" in listed.stdout


@pytest.mark.parametrize("env", [LATIN1, ASCII], ids=["latin-1", "ascii"])
async def test_tables_print_in_ascii_where_the_output_is_not_utf8(
    dsn: str, conn: asyncpg.Connection, env: dict[str, str]
) -> None:
    # "—" (no key, nothing due) and the box of `jobs show` crashed every table command.
    [job] = await enqueue_many(conn, [JobSpec("mail", "{}", 1, None, None, None, 25)])
    cancelled = await venturi_cli_async("jobs", "cancel", str(job), dsn=dsn, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    for args in (["stats"], ["jobs", "show", str(job)], ["jobs", "list"], ["kinds", "list"]):
        out = await venturi_cli_async(*args, dsn=dsn, env=env)
        assert out.returncode == 0 and out.stderr == "", (args, out.stderr)
        assert out.stdout.isascii(), (args, out.stdout)
    shown = await venturi_cli_async("jobs", "show", str(job), dsn=dsn, env=env)
    assert "key       -" in shown.stdout and "+-" in shown.stdout, shown.stdout
