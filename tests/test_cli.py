"""The command line: schema render offline, apply with one-line errors."""

from __future__ import annotations

import subprocess
import sys

import asyncpg

from venturi import sql, store


def venturi(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "venturi", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_schema_render_matches_the_library() -> None:
    out = venturi("schema", "render")
    assert out.returncode == 0, out.stderr
    assert out.stdout == sql.render("venturi", "all")
    part = venturi("schema", "render", "--schema", "other", "--part", "indexes")
    assert part.returncode == 0
    assert part.stdout == sql.render("other", "indexes")


def test_schema_render_never_connects() -> None:
    # A DSN that cannot work: render must not care.
    env = {"VENTURI_DSN": "postgresql://nobody@127.0.0.1:1/none", "PATH": "/usr/bin:/bin"}
    out = venturi("schema", "render", "--part", "claim", env=env)
    assert out.returncode == 0
    assert "PREPARE venturi_job_claim(" in out.stdout


def test_invalid_schema_name_is_one_line() -> None:
    out = venturi("schema", "render", "--schema", "Bad-Name")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "schema must be" in out.stderr


def test_unreachable_dsn_is_one_line_without_password() -> None:
    out = venturi("schema", "apply", "--dsn", "postgresql://me:s3cret@127.0.0.1:1/db")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert "cannot connect to postgresql://me:***@127.0.0.1:1/db" in out.stderr
    assert "s3cret" not in out.stderr and "Traceback" not in out.stderr


def test_missing_dsn() -> None:
    env = {"PATH": "/usr/bin:/bin"}
    out = venturi("schema", "apply", env=env)
    assert out.returncode == 2 and "VENTURI_DSN" in out.stderr


async def test_schema_apply_via_cli(empty_dsn: str) -> None:
    first = venturi("schema", "apply", "--dsn", empty_dsn)
    assert first.returncode == 0, first.stderr
    assert "applied migration(s) 1" in first.stdout
    second = venturi("schema", "apply", env={"VENTURI_DSN": empty_dsn, "PATH": "/usr/bin:/bin"})
    assert second.returncode == 0 and "up to date" in second.stdout
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert await store.schema_version(conn, "venturi") == 1
    finally:
        await conn.close()


def test_redact() -> None:
    assert store.redact("postgresql://u:pw@h:5/d?sslmode=x") == "postgresql://u:***@h:5/d?sslmode=x"
    assert store.redact("postgresql://u@h/d?password=pw") == "postgresql://u@h/d?password=***"
    assert store.redact("postgresql://h/d") == "postgresql://h/d"
