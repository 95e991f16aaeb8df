"""``venturi schema render`` and ``venturi schema apply``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from venturi import sql, validate
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    SchemaOption,
    fail,
    need_dsn,
    run,
)
from venturi.db.errors import DATABASE_ERRORS, one_line
from venturi.errors import ConfigError

schema_app = typer.Typer(help="Render or apply the database schema.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")


@schema_app.command("render")
def schema_render(
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    part: Annotated[str, typer.Option("--part", help="all | tables | indexes | claim")] = "all",
) -> None:
    """Print the schema SQL. Never connects to a database; the output is deterministic."""
    try:
        text = sql.render(schema, part)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(text)


@schema_app.command("apply")
def schema_apply(
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
    lock_timeout: Annotated[
        float | None,
        typer.Option(
            "--lock-timeout",
            help="Seconds each lock is waited for (workers' claims queue behind the wait) "
            "before the apply rolls back and tries again; 5 attempts. Default 3.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create or upgrade the schema; applying twice changes nothing the second time."""
    target = need_dsn(dsn)
    try:
        sql.validate_schema(schema)
        if lock_timeout is not None:
            validate.seconds(lock_timeout, "lock_timeout")
    except ConfigError as exc:
        raise fail(str(exc)) from None

    from venturi.admin import connection  # not at import: see venturi/cli/__init__.py

    async def go() -> list[int]:
        conn = await connection.connect(target, schema=None)
        try:
            return await connection.apply_schema(conn, schema=schema, lock_timeout=lock_timeout)
        finally:
            await conn.close()

    try:
        applied = run(go)
    except DATABASE_ERRORS as exc:
        # The server refused the apply (a role without CREATE, a read-only session or
        # standby): its reason in one line, as every other command says it.
        raise fail(f"database error: {one_line(exc)}") from None
    if applied:
        typer.echo(f"schema {schema}: applied migration(s) {', '.join(map(str, applied))}")
    else:
        typer.echo(f"schema {schema}: up to date")
