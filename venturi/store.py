"""All database work: every function runs one named statement from ``sql_templates``.

No SQL text lives here; ``sql.statement(name, schema)`` hands over the rendered text and
asyncpg prepares and caches it per connection. ``conn`` is anything with asyncpg's query
methods: a Connection (the caller's transaction applies) or a Pool.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import asyncpg

from venturi import sql
from venturi.backoff import Backoff
from venturi.errors import ConnectError, SchemaError

if TYPE_CHECKING:
    from venturi.registry import JobSpec

Record = Any  # asyncpg.Record: untyped

log = logging.getLogger("venturi.recovery")

P = ParamSpec("P")
R = TypeVar("R")


_CONNINFO_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")


def _secrets(dsn: str) -> list[str]:
    """The password of a DSN (URI or key=value), raw and decoded, and its pieces."""
    found: list[str] = []
    if "://" in dsn:
        rest = dsn.split("://", 1)[1]
        if "@" in rest:
            userinfo = rest[: rest.rfind("@")]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
    found += [m.group(2).strip("'") for m in _CONNINFO_PASSWORD.finditer(dsn)]
    found += [m.group(0).split("=", 1)[1] for m in _QUERY_PASSWORD.finditer(dsn)]
    pieces = [urllib.parse.unquote(f) for f in found] + found
    # A parser that split the password (at "/", "?", "#", "@" or ":") may quote a piece.
    for f in list(pieces):
        pieces += [p for p in re.split(r"[/?#@:]", f) if len(p) >= 3]
    return sorted({p for p in pieces if p}, key=len, reverse=True)


def scrub(text: str, dsn: str) -> str:
    """``text`` with every trace of ``dsn``'s password replaced by ***."""
    for secret in _secrets(dsn):
        text = text.replace(secret, "***")
    return text


def redact(dsn: str) -> str:
    """The DSN with any password replaced, safe for logs and error messages.

    Handles URIs (a password in the authority, even holding an unencoded "/", "?" or
    "#", or in the query) and libpq key=value strings.
    """
    if "://" not in dsn:
        return scrub(_CONNINFO_PASSWORD.sub(r"\1***", dsn), dsn)
    scheme, rest = dsn.split("://", 1)
    if "@" in rest:
        # The host starts after the last "@": everything before it is user information,
        # whatever characters the password holds.
        userinfo, host = rest[: rest.rfind("@")], rest[rest.rfind("@") + 1 :]
        user = userinfo.split(":", 1)[0]
        rest = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    return scrub(_QUERY_PASSWORD.sub(r"\1***", f"{scheme}://{rest}"), dsn)


_CONNECT_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError)


def _connect_error(dsn: str, exc: BaseException) -> ConnectError:
    return ConnectError(f"cannot connect to {redact(dsn)}: {scrub(_one_line(exc), dsn)}")


async def connect(dsn: str, **kwargs: Any) -> asyncpg.Connection:
    """An asyncpg connection, or ``ConnectError`` with a one-line, password-free message."""
    try:
        return await asyncpg.connect(dsn, **kwargs)
    except _CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


async def create_pool(dsn: str, **kwargs: Any) -> asyncpg.Pool:
    """An asyncpg pool, or ``ConnectError`` like ``connect``."""
    try:
        return await asyncpg.create_pool(dsn, **kwargs)
    except _CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# --- schema -------------------------------------------------------------------------


def _not_applied(schema: str) -> SchemaError:
    return SchemaError(
        f"the venturi schema {schema!r} is not applied to this database: "
        f"run `venturi schema apply --schema {schema}`"
    )


def needs_schema(
    fn: Callable[Concatenate[Any, str, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Any, str, P], Coroutine[Any, Any, R]]:
    """For the application's own calls (enqueue, reads), which never check the schema
    version first: a missing table or schema becomes the ``SchemaError`` that says what
    to run, instead of asyncpg's ``UndefinedTableError``."""

    @functools.wraps(fn)
    async def wrapper(conn: Any, schema: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(conn, schema, *args, **kwargs)
        except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
            raise _not_applied(schema) from None

    return wrapper


async def schema_version(conn: Any, schema: str) -> int:
    """The applied schema version; ``SchemaError`` saying what to run when there is none."""
    try:
        version = await conn.fetchval(sql.statement("schema_version_get", schema))
    except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
        version = None
    if version is None:
        raise _not_applied(schema)
    latest = sql.migrations(schema)[-1].version
    if version < latest:
        raise SchemaError(
            f"the venturi schema {schema!r} is at version {version}, this venturi needs "
            f"{latest}: run `venturi schema apply --schema {schema}`"
        )
    return int(version)


async def apply_schema(conn: asyncpg.Connection, schema: str) -> list[int]:
    """Create or upgrade the schema; returns the migration versions it applied (none when
    the database is current). Concurrent appliers wait for each other on a lock."""
    async with conn.transaction():
        await conn.execute(sql.statement("schema_lock", schema))
        if not await conn.fetchval(sql.statement("schema_version_exists", schema)):
            await conn.execute(sql.fresh_schema(schema))
            return [m.version for m in sql.migrations(schema)]
        done = {
            r["version"] for r in await conn.fetch(sql.statement("schema_version_list", schema))
        }
        applied = []
        for migration in sql.migrations(schema):
            if migration.version not in done:
                await conn.execute(migration.sql)
                await conn.execute(
                    sql.statement("schema_version_record", schema),
                    migration.version,
                    migration.name,
                )
                applied.append(migration.version)
        return applied


# --- enqueue ------------------------------------------------------------------------


def _backoff_args(spec: JobSpec) -> tuple[float | None, float | None, float | None, bool | None]:
    b = spec.backoff
    return (None, None, None, None) if b is None else (b.base, b.factor, b.cap, b.jitter)


@needs_schema
async def insert_job(conn: Any, schema: str, spec: JobSpec) -> int:
    text = sql.statement("job_insert", schema)
    args = (
        spec.kind,
        spec.carry,
        spec.priority,
        spec.at,
        spec.after,
        spec.key,
        spec.max_failures,
        *_backoff_args(spec),
    )
    # A None answer means the key's holder committed after our snapshot; try again.
    for _ in range(5):
        job_id = await conn.fetchval(text, *args)
        if job_id is not None:
            return int(job_id)
    raise RuntimeError(f"could not enqueue {spec.kind!r} with key {spec.key!r}: key kept changing")


def _backoff_arrays(specs: Sequence[JobSpec]) -> list[list[Any]]:
    """The base, factor, cap and jitter arrays of the specs' declared backoffs."""
    rows = [_backoff_args(s) for s in specs]
    return [[r[i] for r in rows] for i in range(4)]


@needs_schema
async def insert_jobs(conn: Any, schema: str, specs: Sequence[JobSpec]) -> list[int]:
    if all(s.key is None for s in specs):
        # One statement: all or nothing by itself, and no key to wait on.
        rows = await conn.fetch(
            sql.statement("job_insert_many_unkeyed", schema),
            [s.kind for s in specs],
            [s.carry for s in specs],
            [s.priority for s in specs],
            [s.at for s in specs],
            [s.after for s in specs],
            [s.max_failures for s in specs],
            *_backoff_arrays(specs),
        )
        # Ascending ids are input order (see the statement's header).
        return sorted(int(r["id"]) for r in rows)
    # A key whose holder commits while the statement waits on it comes back without an
    # id; the statement runs again for those rows. The batch is one transaction (a
    # savepoint inside the caller's), so a batch that cannot finish leaves nothing behind.
    async with _transaction(conn) as tx:
        text = sql.statement("job_insert_many", schema)
        ids: list[int | None] = [None] * len(specs)
        todo = list(range(len(specs)))
        for _ in range(5):
            rows = await tx.fetch(
                text,
                [specs[i].kind for i in todo],
                [specs[i].carry for i in todo],
                [specs[i].priority for i in todo],
                [specs[i].at for i in todo],
                [specs[i].after for i in todo],
                [specs[i].key for i in todo],
                [specs[i].max_failures for i in todo],
                *_backoff_arrays([specs[i] for i in todo]),
            )
            for i, row in zip(todo, rows, strict=True):
                ids[i] = None if row["id"] is None else int(row["id"])
            todo = [i for i in todo if ids[i] is None]
            if not todo:
                return [int(i) for i in ids if i is not None]
        s = specs[todo[0]]
        raise RuntimeError(f"could not enqueue {s.kind!r} with key {s.key!r}: key kept changing")


@contextlib.asynccontextmanager
async def _transaction(conn: Any) -> AsyncIterator[Any]:
    """A transaction on ``conn``: a Connection's own (a savepoint when the caller's is
    open), or one on a connection taken from a Pool."""
    if hasattr(conn, "transaction"):
        async with conn.transaction():
            yield conn
        return
    async with conn.acquire() as held, held.transaction():
        yield held


# --- the worker's statements --------------------------------------------------------


@dataclass(frozen=True)
class Claimant:
    """Who claims: ``name`` is the identity recorded on claims and in the journal
    (diagnostics only); ``token``, unique to each worker run, is what ownership compares.
    Two claimants with the same name never settle, renew or release each other's jobs."""

    name: str
    token: uuid.UUID = field(default_factory=uuid.uuid4)


async def claim(
    conn: Any,
    schema: str,
    worker: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    floor: int,
    limit: int,
    backoff: Backoff,
) -> list[Record]:
    """Recover expired claims and claim up to ``limit`` jobs; the claimed rows."""
    claimed, _ = await complete_and_claim(
        conn, schema, worker, kinds, leases, floor, limit, backoff
    )
    return claimed


async def complete_and_claim(
    conn: Any,
    schema: str,
    worker: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    floor: int,
    limit: int,
    backoff: Backoff,
    done: Sequence[tuple[int, int, str | None]] = (),
) -> tuple[list[Record], set[int]]:
    """Settle ``done`` (id, attempt, result) as completed, recover expired claims and
    claim up to ``limit`` jobs, in one statement and one commit. Returns the claimed rows
    and the ids whose completion applied (the others lost their claim)."""
    rows = await conn.fetch(
        sql.statement("job_claim", schema),
        worker.name,
        kinds,
        leases,
        floor,
        limit,
        backoff.base,
        backoff.factor,
        backoff.cap,
        [d[0] for d in done],
        [d[1] for d in done],
        [d[2] for d in done],
        worker.token,
        backoff.jitter,
    )
    claimed = [r for r in rows if not r["settled"]]
    settled = {int(r["id"]) for r in rows if r["settled"] and r["recovered_from"] is None}
    for r in rows:
        if r["recovered_from"] is not None:
            extra = {"job_id": r["id"], "kind": r["kind"], "attempt": r["attempt"]}
            log.warning(
                "recovered job %d (%s): its lease expired; worker %s presumed dead (failure "
                "%d of %d)",
                r["id"],
                r["kind"],
                r["recovered_from"],
                r["failures"],
                r["max_failures"],
                extra=extra,
            )
    return claimed, settled


async def next_visible_at(conn: Any, schema: str, kinds: Sequence[str]) -> datetime | None:
    value: datetime | None = await conn.fetchval(
        sql.statement("job_next_visible_at", schema), kinds
    )
    return value


async def complete_many(
    conn: Any,
    schema: str,
    worker: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    results: Sequence[str | None],
) -> set[int]:
    rows = await conn.fetch(
        sql.statement("job_complete_many_if_owned", schema), worker.token, ids, attempts, results
    )
    return {int(r["id"]) for r in rows}


async def pause(
    conn: Any,
    schema: str,
    worker: Claimant,
    job_id: int,
    attempt: int,
    carry: str,
    at: datetime | None,
    after: float | None,
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_pause_if_owned", schema), worker.token, job_id, attempt, carry, at, after
    )
    return row is not None


async def fail(
    conn: Any,
    schema: str,
    worker: Claimant,
    job_id: int,
    attempt: int,
    event: str,
    error: str,
    carry: str | None,
    delay: float,
    force_dead: bool,
) -> str | None:
    """Settle a failed execution; returns the new status, or None if the claim was lost."""
    row = await conn.fetchrow(
        sql.statement("job_fail_if_owned", schema),
        worker.token,
        job_id,
        attempt,
        event,
        error,
        carry,
        delay,
        force_dead,
    )
    return None if row is None else str(row["status"])


async def dead(
    conn: Any, schema: str, worker: Claimant, job_id: int, attempt: int, reason: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_dead_if_owned", schema), worker.token, job_id, attempt, reason
    )
    return row is not None


async def release(
    conn: Any, schema: str, worker: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_release_if_owned", schema), worker.token, job_id, attempt, detail
    )
    return row is not None


async def recover_stale(conn: Any, schema: str, recoverer: str, backoff: Backoff) -> list[Record]:
    """Recover expired claims; ``backoff`` applies to jobs whose task declared none."""
    return list(
        await conn.fetch(
            sql.statement("job_recover_stale", schema),
            recoverer,
            backoff.base,
            backoff.factor,
            backoff.cap,
            backoff.jitter,
        )
    )


# --- reads --------------------------------------------------------------------------


@needs_schema
async def get_job(conn: Any, schema: str, job_id: int) -> Record | None:
    return await conn.fetchrow(sql.statement("job_get", schema), job_id)


@needs_schema
async def get_journal(conn: Any, schema: str, job_id: int) -> list[Record]:
    return list(await conn.fetch(sql.statement("journal_get", schema), job_id))


async def job_counts(conn: Any, schema: str, ids: Sequence[int] | None = None) -> list[Record]:
    return list(await conn.fetch(sql.statement("job_counts", schema), ids))


async def heartbeat(
    conn: Any,
    schema: str,
    worker: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    leases: Sequence[float | None],
) -> list[Record]:
    """Renew due leases and read ownership and cancel requests of running jobs."""
    return list(
        await conn.fetch(
            sql.statement("job_heartbeat_if_owned", schema), worker.token, ids, attempts, leases
        )
    )


async def cancel(
    conn: Any, schema: str, worker: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_cancel_if_owned", schema), worker.token, job_id, attempt, detail
    )
    return row is not None


# --- per-kind queue pause -----------------------------------------------------------


async def pause_kinds(
    conn: Any, schema: str, kinds: Sequence[str], paused_by: str, reason: str
) -> list[Record]:
    return list(
        await conn.fetch(sql.statement("kind_pause", schema), list(kinds), paused_by, reason)
    )


async def known_kinds(conn: Any, schema: str, kinds: Sequence[str]) -> set[str]:
    """Those of ``kinds`` that some job or schedule has (the others are probably typos)."""
    rows = await conn.fetch(sql.statement("kind_list_known", schema), list(kinds))
    return {r["kind"] for r in rows}


async def resume_kinds(conn: Any, schema: str, kinds: Sequence[str]) -> list[str]:
    rows = await conn.fetch(sql.statement("kind_resume", schema), list(kinds))
    return [str(r["kind"]) for r in rows]


async def paused_kinds(conn: Any, schema: str) -> list[Record]:
    return list(await conn.fetch(sql.statement("kind_paused_list", schema)))


# --- shared rate limits ---------------------------------------------------------------


async def claim_rated(
    pool: Any,
    schema: str,
    worker: Claimant,
    kind: str,
    lease: float,
    per_second: float,
    burst: int,
    wanted: int,
    backoff: Backoff,
) -> tuple[list[Record], float]:
    """Claim up to ``wanted`` jobs of a kind with a shared rate limit, within its bucket:
    take tokens, claim, spend one per job, in one transaction. Returns the claimed rows
    and, when the bucket was empty, the seconds until its next token."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            sql.statement("rate_take", schema), kind, per_second, burst, wanted
        )
        granted, wait = int(row["granted"]), float(row["wait"])
        if granted < 1:
            return [], max(wait, 0.001)
        claimed, _ = await complete_and_claim(
            conn, schema, worker, [kind], [lease], 0, granted, backoff
        )
        if claimed:
            await conn.execute(sql.statement("rate_spend", schema), kind, len(claimed))
        return claimed, 0.0


async def release_orphans(
    conn: Any, schema: str, worker: Claimant, running: Sequence[int]
) -> list[Record]:
    """Release jobs claimed with ``worker``'s token that it is not running (a lost claim
    answer); other claimants of the same name keep theirs."""
    return list(
        await conn.fetch(
            sql.statement("job_release_orphans_if_owned", schema), worker.token, list(running)
        )
    )
