"""How venturi tells database errors apart, and how it prints one in a line.

The worker survives ``TRANSIENT`` errors. Of those, ``RETRYABLE`` ones say nothing about
the statement (the connection, the server's state, contention); any other database
error in a settlement is about what is being written, and retrying the same write would
fail forever (``refused``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from venturi import sql
from venturi.backoff import Backoff
from venturi.errors import SchemaError

# What the loop survives: a lost connection, a restarting server, a terminated backend.
TRANSIENT = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # Raised by asyncpg, for one, when it resets a connection whose backend was killed.
    asyncpg.InternalClientError,
    TimeoutError,
)

# Errors that say nothing about the statement itself: the connection, the server's state,
# contention.
RETRYABLE = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.TransactionRollbackError,
    asyncpg.exceptions.LockNotAvailableError,
    # The server refuses every write for now (read-only mode, a demoted primary): the
    # outcome is right and is written once writes return. Only this one of class 25; the
    # rest of that class is about the statement's own transaction.
    asyncpg.exceptions.ReadOnlySQLTransactionError,
)

# An error the server raised about a statement (a constraint, a type, a missing table).
STATEMENT_ERROR = asyncpg.PostgresError

# The schema or one of its tables is missing.
MISSING_SCHEMA = (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError)

# Which SQLSTATEs mean "the schema is not applied": undefined table, invalid schema name
# (``MISSING_SCHEMA`` for any driver).
_MISSING_SCHEMA = frozenset({"42P01", "3F000"})
# A lock not granted within the session's lock_timeout (lock_not_available).
_LOCK_TIMED_OUT = "55P03"


def sqlstate(exc: BaseException, *, context: bool = True) -> str | None:
    """The SQLSTATE of ``exc`` (any driver's, or SQLAlchemy's or Django's wrapper of one,
    found through its causes), or None when it carries none. ``context`` False: through
    its explicit causes only (``__cause__``, a wrapper's ``orig``), not the exceptions
    being handled when it was raised: those may be the caller's own."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        # asyncpg and psycopg 3 name it sqlstate, psycopg2 pgcode.
        state = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
        if state:
            return str(state)
        todo += [e.__cause__, e.__context__ if context else None, getattr(e, "orig", None)]
    return None


def missing_schema(exc: BaseException) -> bool:
    """Does ``exc`` say that a table or schema is missing?"""
    return sqlstate(exc) in _MISSING_SCHEMA


# A venturi statement that names what the database lacks: a table or the schema (not
# applied), a column or a function (a migration not applied yet: the application was
# upgraded before the database).
_LACKING = _MISSING_SCHEMA | {"42703", "42883"}


def lacking(exc: BaseException) -> bool:
    """Does ``exc`` itself say that a table, schema, column or function is missing? Not
    through the exceptions being handled when it was raised: an application's flush that
    failed on its own missing column, then venturi's enqueue in its except block on the
    same session (SQLAlchemy's PendingRollbackError, with no SQLSTATE of its own), read
    as venturi's schema being behind, on a schema that was current."""
    return sqlstate(exc, context=False) in _LACKING


def lock_timed_out(exc: BaseException) -> bool:
    """Did ``exc`` end a statement that waited longer than its ``lock_timeout``?"""
    return sqlstate(exc) == _LOCK_TIMED_OUT


# A unique index refused a row (two unfinished jobs of a kind with one key).
UNIQUE_VIOLATION = asyncpg.UniqueViolationError

# What an operator's call (CLI, dashboard, venturi.admin) can raise from the database: an
# unreachable server, a statement the server refused, a dropped connection. The CLI and
# the dashboard catch this one tuple and print one line.
DATABASE_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)

# What connecting can raise: a refused or unreachable server, bad credentials, a bad DSN,
# and a server that answers but is not what the DSN's target_session_attrs asks for (a
# primary refusing writes for a while, a standby not yet promoted: asyncpg says so with
# one of its internal client errors).
CONNECT_ERRORS = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.TargetServerAttributeNotMatched,
    ValueError,
)


def refused(exc: BaseException) -> bool:
    """Did the server refuse this statement itself (retrying the same write cannot help)?"""
    return isinstance(exc, STATEMENT_ERROR) and not isinstance(exc, RETRYABLE)


def unusable(exc: BaseException) -> bool:
    """After ``exc``, is the connection's state unknown? A statement's own error leaves it
    usable; connection trouble or a cancel mid-statement does not."""
    return not isinstance(exc, STATEMENT_ERROR) or isinstance(exc, RETRYABLE)


def one_line(exc: BaseException) -> str:
    """The first line of an error's text (at most 300 characters), else its type's name."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# How long to wait between attempts after a database error: doubling, capped.
ERROR_BACKOFF = Backoff.exponential(0.1, 2.0, 5.0, jitter=True)


# What a schema error tells the user to run; {schema} is the schema's name. Inside a Django
# project the fix is `manage.py migrate`, so the Django app replaces it (set_apply_hint).
# The DSN is part of the command: pasted as it is, a hint without one failed for want of
# a database (the placeholder says what to put there; VENTURI_DSN does as well).
_apply_hint = "venturi schema apply --schema {schema} --dsn <DSN>"


def set_apply_hint(command: str) -> None:
    """Make schema errors in this process say to run ``command`` (``{schema}`` in it
    becomes the schema's name) instead of ``venturi schema apply``."""
    global _apply_hint
    _apply_hint = command


def apply_hint(schema: str) -> str:
    """The command that applies or upgrades ``schema`` here, as schema errors quote it."""
    return _apply_hint.format(schema=schema)


def not_applied(schema: str) -> SchemaError:
    """The error of a call on a database without the schema: it says what to run."""
    return SchemaError(
        f"the venturi schema {schema!r} is not applied to this database: run `{apply_hint(schema)}`"
    )


def behind(schema: str, version: int) -> SchemaError:
    """The error of a call on a database whose schema is older than this venturi needs."""
    return SchemaError(
        f"the venturi schema {schema!r} is at version {version}, this venturi needs "
        f"{sql.latest_migration()}: run `{apply_hint(schema)}`"
    )


def schema_error(
    schema: str, exc: BaseException, version: int | None, *, read: bool = True
) -> SchemaError | None:
    """What a ``lacking`` error of one of venturi's statements means, given the schema
    version read after it (None: no schema; ``read`` False: it could not be read, in the
    transaction the error aborted): not applied, behind, or None when the schema is
    current (the error is then about something else, and stands)."""
    if not read:
        # A table, column or function missing from venturi's own statement: the schema not
        # applied or an unapplied migration, which the version, unread, cannot tell apart
        # (a table of a later migration is missing from an older schema too: set_group
        # in a transaction at version 18 said "not applied" of an applied schema).
        return SchemaError(
            f"{one_line(exc)}: the venturi schema {schema!r} may be older than this "
            f"venturi needs (version {sql.latest_migration()}) or not applied: run "
            f"`{apply_hint(schema)}`"
        )
    if version is None:
        return not_applied(schema)
    if version < sql.latest_migration():
        return behind(schema, version)
    return None


async def schema_error_of(
    exc: BaseException, schema: str, read: Callable[[], Awaitable[int | None]]
) -> SchemaError | None:
    """The ``SchemaError`` that ``exc``, raised by one of venturi's statements, stands
    for (the schema missing, or older than this venturi needs), from the version ``read``
    reads: one read, on this error path only. None when ``exc`` is about anything else."""
    if not lacking(exc):
        return None
    try:
        return schema_error(schema, exc, await read())
    except Exception as again:  # unread: the error aborted the caller's transaction
        return schema_error(schema, exc, None, read=missing_schema(again))


def schema_error_of_sync(
    exc: BaseException, schema: str, read: Callable[[], int | None]
) -> SchemaError | None:
    """``schema_error_of`` with a synchronous ``read``."""
    if not lacking(exc):
        return None
    try:
        return schema_error(schema, exc, read())
    except Exception as again:
        return schema_error(schema, exc, None, read=missing_schema(again))
