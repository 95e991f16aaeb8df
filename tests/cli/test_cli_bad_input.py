"""`venturi worker` on bad input: an unapplied schema, an unreachable or missing
database, a bad knob; each a one-line error and nothing else, as a real subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import (
    UNREACHABLE,
    assert_one_clean_error,
    venturi_cli,
    venturi_cli_async,
    without_uvloop,
)


@pytest.mark.parametrize("schema", ["venturi", "jobs_b"])
async def test_worker_cli_on_an_unapplied_schema_says_what_to_run(
    empty_dsn: str, schema: str
) -> None:
    out = await venturi_cli_async(
        "worker", "tests.support.workertasks", "--dsn", empty_dsn, "--schema", schema
    )
    assert_one_clean_error(
        out,
        f"schema {schema!r} is not applied",
        f"run `venturi schema apply --schema {schema} --dsn <DSN>`",
    )


async def test_worker_cli_on_an_unapplied_schema_prints_one_line(empty_dsn: str) -> None:
    out = await venturi_cli_async("worker", "tests.support.workertasks", "--dsn", empty_dsn)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        (UNREACHABLE, "cannot connect to postgresql://me:***@127.0.0.1:1/db"),
        ("postgresql://me:s3cret-pw@no-such-host.invalid/db", "cannot connect to"),
        ("mysql://me:s3cret-pw@127.0.0.1/db", "cannot connect to"),
    ],
)
def test_worker_cli_on_an_unreachable_database_is_one_line(dsn: str, said: str) -> None:
    out = venturi_cli("worker", "tests.support.workertasks", "--dsn", dsn)
    assert_one_clean_error(out, said)
    assert out.stderr.count("\n") == 1, out.stderr


async def test_worker_cli_on_a_missing_database_is_one_line(dsn: str) -> None:
    missing = dsn.rsplit("/", 1)[0] + "/venturi_no_such_db"
    out = await venturi_cli_async("worker", "tests.support.workertasks", "--dsn", missing)
    assert_one_clean_error(out, 'database "venturi_no_such_db" does not exist')


@pytest.mark.parametrize(
    ("args", "knob"),
    [
        (["--concurrency", "0"], "concurrency must be"),
        (["--lease", "-1"], "lease must be positive"),
        (["--lease", "nan"], "lease must be finite"),
        (["--poll-max", "0"], "poll_max must be positive"),
        (["--shutdown-timeout", "-1"], "shutdown_timeout must be"),
        (["--priority-ratio", "1"], "priority-ratio must be"),
        (["--log-level", "loud"], "log-level must be"),
        (["--loop", "tokio"], "loop must be auto, uvloop or asyncio, got 'tokio'"),
        (["--schema", "jobs; DROP TABLE x"], "schema must be a lower-case SQL identifier"),
    ],
)
def test_worker_cli_bad_knob_is_refused_before_connecting(args: list[str], knob: str) -> None:
    # The DSN cannot work: the knob's error, not a connection error, proves the check
    # comes first.
    out = venturi_cli("worker", "tests.support.workertasks", "--dsn", UNREACHABLE, *args)
    assert_one_clean_error(out, knob)
    assert out.stderr.count("\n") == 1 and "cannot connect" not in out.stderr


def test_worker_cli_loop_uvloop_without_uvloop_is_one_line(tmp_path: Path) -> None:
    out = venturi_cli(
        "worker",
        "tests.support.workertasks",
        "--dsn",
        UNREACHABLE,
        "--loop",
        "uvloop",
        env=without_uvloop(tmp_path),
    )
    assert_one_clean_error(out, "loop uvloop: uvloop is not installed", "--loop asyncio")
    assert out.stderr.count("\n") == 1 and "cannot connect" not in out.stderr
