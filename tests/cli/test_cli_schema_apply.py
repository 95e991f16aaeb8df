"""`venturi schema apply` when the database refuses it: one line, exit 2, as a real
subprocess (a role without CREATE, a read-only session, a schema name PostgreSQL
reserves)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support import assert_one_clean_error, venturi_cli_async
from tests.support.cli import PASSWORD


@pytest.fixture
async def app_role_dsn(empty_dsn: str) -> AsyncIterator[str]:
    """``empty_dsn`` as a role that may log in but not create schemas (an application's
    role), with a password that must never show."""
    role = f"venturi_app_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(empty_dsn)
    try:
        await admin.execute(f"create role {role} login password '{PASSWORD}'")
        rest = empty_dsn.split("@", 1)[1]
        yield f"postgresql://{role}:{PASSWORD}@{rest}"
    finally:
        await admin.execute(f"drop role if exists {role}")
        await admin.close()


async def test_schema_apply_without_create_privilege_is_one_line(app_role_dsn: str) -> None:
    out = await venturi_cli_async("schema", "apply", "--dsn", app_role_dsn)
    assert_one_clean_error(out, "database error: permission denied for database")
    assert out.stderr.count("\n") == 1, out.stderr


async def test_schema_apply_on_a_read_only_session_is_one_line(empty_dsn: str) -> None:
    read_only = f"{empty_dsn}?options=-c%20default_transaction_read_only%3Don"
    out = await venturi_cli_async("schema", "apply", "--dsn", read_only)
    assert_one_clean_error(out, "database error: cannot execute CREATE SCHEMA")
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize(
    "args", [["schema", "apply", "--dsn"], ["stats", "--dsn"], ["schema", "render", "--part"]]
)
async def test_a_pg_schema_name_is_refused_before_the_server(
    empty_dsn: str, args: list[str]
) -> None:
    # PostgreSQL reserves the pg_ prefix: `stats` used to say "run venturi schema apply
    # --schema pg_x", and that apply then failed in the server with a traceback.
    value = "all" if args[-1] == "--part" else empty_dsn
    out = await venturi_cli_async(*args, value, "--schema", "pg_x")
    assert_one_clean_error(out, "schema must", "not start with pg_", "'pg_x'")
    assert out.stderr.count("\n") == 1, out.stderr
    conn = await asyncpg.connect(empty_dsn)
    try:  # nothing was created
        assert await conn.fetchval("select count(*) from pg_namespace where nspname = 'pg_x'") == 0
    finally:
        await conn.close()
