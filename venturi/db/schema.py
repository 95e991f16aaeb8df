"""The schema: which version a database has, and applying or upgrading it."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from venturi import sql
from venturi.db import drivers
from venturi.db.conn import Conn
from venturi.db.drivers import Query, Steps
from venturi.db.errors import (
    MISSING_SCHEMA,
    apply_hint,
    behind,
    lock_timed_out,
    not_applied,
    schema_error_of,
)
from venturi.errors import ConfigError, SchemaError

F = TypeVar("F", bound=Callable[..., Coroutine[Any, Any, Any]])


def needs_schema(fn: F) -> F:
    """For the application's own calls on asyncpg (a COPY of jobs), which never check the
    schema version first: a missing table, schema or column becomes the ``SchemaError``
    that says what to run (``schema_error_of``), instead of the driver's error."""

    @functools.wraps(fn)
    async def wrapper(conn: Any, *args: Any, schema: str, **kwargs: Any) -> Any:
        try:
            return await fn(conn, *args, schema=schema, **kwargs)
        except Exception as exc:
            error = await schema_error_of(
                exc, schema, lambda: conn.fetchval(sql.statement("schema_version_get", schema))
            )
            if error is None:
                raise
            raise error from None

    return cast(F, wrapper)


async def schema_version(conn: Conn, *, schema: str) -> int:
    """The applied schema version; ``SchemaError`` saying what to run when there is none
    or when it is older than this venturi needs."""
    try:
        version = await conn.fetchval(sql.statement("schema_version_get", schema))
    except MISSING_SCHEMA:
        version = None
    if version is None:
        raise not_applied(schema)
    if version < sql.latest_migration():
        raise behind(schema, version)
    return int(version)


# How long `schema apply` waits for each lock before it rolls back (seconds), and how many
# times it tries. A migration that alters jobs takes an ACCESS EXCLUSIVE lock; behind an
# application's open transaction (a web request that enqueued and has not committed), the
# queued request held every worker's claim and settlement for as long as it waited (9 s
# of no completions in the upgrade probe). Bounded, workers wait at most this long per
# attempt, and run between attempts: the pause is as long as the wait.
LOCK_TIMEOUT = 3.0
LOCK_ATTEMPTS = 5


def apply_schema_steps(lock_timeout: float = LOCK_TIMEOUT) -> Steps[list[int]]:
    """Create or upgrade the schema (run ``atomic``: the whole upgrade is one
    transaction); the migration versions applied, none when the database is current.
    Concurrent appliers wait for each other on a lock (unbounded: it holds no table);
    every other lock is waited for at most ``lock_timeout`` seconds."""
    yield Query("schema_lock")
    # At least 1 ms: 0 would turn the bound off.
    [setting] = yield Query("schema_lock_timeout", (f"{max(1, round(lock_timeout * 1000))}ms",))
    [exists] = yield Query("schema_version_exists")
    applied = []
    if not exists["applied"]:
        yield Query("schema/tables", script=True)
        yield Query("schema/indexes", script=True)
        applied = [m.version for m in sql.migrations()]
    else:
        done = {r["version"] for r in (yield Query("schema_version_list"))}
        for migration in sql.migrations():
            if migration.version not in done:
                yield Query(migration.template, script=True)
                yield Query("schema_version_record", (migration.version, migration.name))
                applied.append(migration.version)
    # Inside a caller's transaction (Django's migrate) the setting would outlive the apply.
    yield Query("schema_lock_timeout", (setting["previous"],))
    return applied


def _lock_holders_steps() -> Steps[list[drivers.Row]]:
    return (yield Query("schema_lock_holders"))


def _gave_up(schema: str, lock_timeout: float, holders: list[drivers.Row]) -> SchemaError:
    """The error of an apply that never got its locks: who held them, and that nothing
    was applied (each attempt rolled back)."""
    if holders:
        h = holders[0]
        held = (
            f"pid {h['pid']} (application_name {h['application_name']!r}, {h['state']}, "
            f"its transaction open {h['open_for'] or 0:.0f}s)"
        )
        if len(holders) > 1:
            held += f" and {len(holders) - 1} other session(s)"
    else:
        held = "a session that has ended since"
    return SchemaError(
        f"schema {schema!r} not upgraded: {held} held a lock on its tables through "
        f"{LOCK_ATTEMPTS} attempts of {lock_timeout:g}s each; nothing was applied: end that "
        f"transaction (or wait for a quiet moment) and run `{apply_hint(schema)}` again"
    )


def _lock_timeout(value: float) -> float:
    # Checked before any statement. PostgreSQL reads 0 as no bound at all (the wait this
    # exists to end), and takes at most 2^31 ms; a day is more than any apply should wait.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 86_400:
        raise ConfigError(
            f"lock_timeout must be a number of seconds > 0 and < 86400, got {value!r}"
        )
    return float(value)


async def apply_schema(conn: Any, *, schema: str, lock_timeout: float = LOCK_TIMEOUT) -> list[int]:
    """``apply_schema_steps`` on one async connection (or a pool: one of its own), tried
    ``LOCK_ATTEMPTS`` times when a lock is not granted within ``lock_timeout`` seconds;
    then ``SchemaError`` naming the session that held it."""
    lock_timeout = _lock_timeout(lock_timeout)
    for attempt in range(LOCK_ATTEMPTS):
        if attempt:
            await asyncio.sleep(lock_timeout)
        try:
            steps = apply_schema_steps(lock_timeout)
            return await drivers.run(conn, steps, schema=schema, atomic=True, explain=False)
        except Exception as exc:
            if not lock_timed_out(exc):
                raise
    holders = await drivers.run(conn, _lock_holders_steps(), schema=schema)
    raise _gave_up(schema, lock_timeout, holders)


def apply_schema_sync(conn: Any, *, schema: str, lock_timeout: float = LOCK_TIMEOUT) -> list[int]:
    """``apply_schema`` on a sync connection (Django's, in its migration: each attempt
    runs in a savepoint, whose rollback releases the locks it took)."""
    lock_timeout = _lock_timeout(lock_timeout)
    for attempt in range(LOCK_ATTEMPTS):
        if attempt:
            time.sleep(lock_timeout)
        try:
            steps = apply_schema_steps(lock_timeout)
            return drivers.run_sync(conn, steps, schema=schema, atomic=True, explain=False)
        except Exception as exc:
            if not lock_timed_out(exc):
                raise
    holders = drivers.run_sync(conn, _lock_holders_steps(), schema=schema)
    raise _gave_up(schema, lock_timeout, holders)
