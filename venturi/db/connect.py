"""Opening connections and pools, and keeping passwords out of what venturi prints."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from venturi.db.conn import TxConn
from venturi.db.errors import CONNECT_ERRORS, one_line
from venturi.errors import ConnectError

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


def _connect_error(dsn: str, exc: BaseException) -> ConnectError:
    return ConnectError(f"cannot connect to {redact(dsn)}: {scrub(one_line(exc), dsn)}")


# A DSN that points at a transaction pooler (PgBouncer's pool_mode = transaction) says so
# with this query parameter; venturi removes it before connecting, so the driver and the
# server never see it.
POOLER_PARAM = "pooler"
POOLER_TRANSACTION = "transaction"
_POOLER_CONNINFO = re.compile(r"(?i)(?:^|\s)pooler\s*=\s*(\S*)")


def split_pooler(dsn: str) -> tuple[str, bool]:
    """``dsn`` without its ``pooler=transaction`` parameter, and whether it had one.

    Behind a transaction pooler consecutive transactions of one client connection may run
    on different server connections, so a statement prepared by name on one is unknown on
    the next: such connections are opened without asyncpg's prepared-statement cache.
    Any other value of the parameter is a ``ConnectError`` (a typo must not silently keep
    the cache)."""
    if "://" not in dsn:
        found = _POOLER_CONNINFO.search(dsn)
        if found is None:
            return dsn, False
        _check_pooler(found.group(1), dsn)
        return (dsn[: found.start()] + dsn[found.end() :]).strip(), True
    head, sep, query = dsn.partition("?")
    if not sep:
        return dsn, False
    query, hash_, fragment = query.partition("#")
    kept, pooled = [], False
    for item in query.split("&"):
        key, _, value = item.partition("=")
        if urllib.parse.unquote(key).lower() == POOLER_PARAM:
            _check_pooler(urllib.parse.unquote(value), dsn)
            pooled = True
        elif item:
            kept.append(item)
    if not pooled:
        return dsn, False
    return head + ("?" + "&".join(kept) if kept else "") + hash_ + fragment, True


def _check_pooler(value: str, dsn: str) -> None:
    if value.strip().lower() != POOLER_TRANSACTION:
        raise ConnectError(
            f"{redact(dsn)}: {POOLER_PARAM} must be {POOLER_TRANSACTION!r} "
            f"(the DSN points at a transaction pooler), got {value!r}"
        )


def behind_pooler(dsn: str) -> bool:
    """Does ``dsn`` say it points at a transaction pooler (``pooler=transaction``)?"""
    return split_pooler(dsn)[1]


# A SQLAlchemy URL names its driver in the scheme: postgresql+asyncpg://,
# postgresql+psycopg://, postgres+psycopg2://. libpq and asyncpg take the same URL without it.
_DRIVER_SCHEME = re.compile(r"(?i)^(postgres(?:ql)?)\+[a-z0-9_]+://")


def plain_dsn(dsn: str) -> str:
    """``dsn`` as libpq and asyncpg take it: a SQLAlchemy URL (``postgresql+asyncpg://...``,
    the one an application already holds) without the driver in its scheme; any other
    DSN as it is."""
    return _DRIVER_SCHEME.sub(r"\1://", dsn, count=1)


# asyncpg caches (prepares once) only statements up to 15 KiB of text by default; a longer
# one is parsed and planned anew on every call. The grouped claim is 16 KiB with its
# comments: uncached, each claim paid a round trip of its own and a custom plan (1.6-2 ms
# of planning a claim; benchmarks/JOURNAL.md, "The grouped claim was never prepared").
MAX_CACHED_STATEMENT = 64 * 1024


def _options(dsn: str, pooled: bool, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    plain, marked = split_pooler(plain_dsn(dsn))
    if marked or pooled:
        kwargs = {**kwargs, "statement_cache_size": 0}
    else:
        kwargs = {"max_cacheable_statement_size": MAX_CACHED_STATEMENT, **kwargs}
    return plain, kwargs


async def connect(dsn: str, *, pooled: bool = False, **kwargs: Any) -> asyncpg.Connection:
    """An asyncpg connection, or ``ConnectError`` with a one-line, password-free message.

    Without a prepared-statement cache when ``pooled`` or when the DSN says
    ``pooler=transaction`` (see ``split_pooler``)."""
    plain, kwargs = _options(dsn, pooled, kwargs)
    try:
        return await asyncpg.connect(plain, **kwargs)
    except CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


async def create_pool(dsn: str, *, pooled: bool = False, **kwargs: Any) -> asyncpg.Pool:
    """An asyncpg pool, or ``ConnectError`` like ``connect`` (and like it, without a
    prepared-statement cache behind a transaction pooler)."""
    plain, kwargs = _options(dsn, pooled, kwargs)
    try:
        return await asyncpg.create_pool(plain, **kwargs)
    except CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


def is_pool(obj: Any) -> bool:
    """Is ``obj`` asyncpg's own Pool (not a look-alike)?"""
    return isinstance(obj, asyncpg.Pool)


# How long a connection given back may take to reset before its pool closes it instead.
RELEASE_TIMEOUT = 2.0


async def release(pool: Any, conn: Any, within: float = RELEASE_TIMEOUT) -> None:
    """Give ``conn`` back to ``pool``, its reset bounded by ``within`` seconds; its errors are
    the caller's. asyncpg resets the connection in a task of its own behind
    ``asyncio.shield``: a caller cancelled meanwhile (a worker stopping) leaves that task
    running with no one to see how it ends, and when the connection then breaks (a
    black-holed link, the pool closed at exit) its error went to the worker's log as a
    traceback, "Task exception was never retrieved" (found by the chaos scenario
    ``blackhole``). Here the release runs in a task that is always observed."""
    giving = asyncio.ensure_future(pool.release(conn, timeout=within))
    giving.add_done_callback(_observed)
    await asyncio.shield(giving)


@contextlib.asynccontextmanager
async def pooled(pool: Any) -> AsyncIterator[Any]:
    """``async with pool.acquire()`` whose release goes through ``release``: a caller
    cancelled while the connection resets (a worker stopping mid-task) leaves no error
    unseen. Anything that is not asyncpg's own Pool (the worker's held connection, a test
    double) is used through its own ``acquire``."""
    if not is_pool(pool):
        async with pool.acquire() as conn:
            yield conn
        return
    conn = await pool.acquire()
    try:
        yield conn
    finally:
        await release(pool, conn)


def _observed(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # seen: a caller still waiting gets it through the shield


@contextlib.asynccontextmanager
async def transaction(conn: Any) -> AsyncIterator[TxConn]:
    """A transaction on ``conn``: a Connection's own (a savepoint when the caller's is
    open), or one on a connection taken from a Pool."""
    if hasattr(conn, "transaction"):
        async with conn.transaction():
            yield conn
        return
    async with pooled(conn) as held, held.transaction():
        yield held


# Client TCP keepalives on the worker's own connections: asyncpg sets none, and the
# kernel's default first probe comes after two hours. With these a dead host, or a
# firewall that silently drops the flow, fails the socket in about 25 s (10 s idle, then
# 3 probes 5 s apart), the idle LISTEN connection included; TCP_USER_TIMEOUT bounds how
# long sent data may stay unacknowledged (a write into a vanished peer). A peer that is
# alive but frozen (a stuck pooler, a stopped server process) ACKs probes from its
# kernel: the statement deadline and the LISTEN health check catch that.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 10, 5, 3
USER_TIMEOUT_MS = 30_000


def set_keepalive(conn: Any) -> bool:
    """Turn on TCP keepalives (and, on Linux, TCP_USER_TIMEOUT) on ``conn``'s socket;
    False when it has none to set (a Unix socket, a look-alike)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
        ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS),
    ):
        option = getattr(socket, name, None)
        if option is not None:  # not every platform has each
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
    return True


async def _keepalive_init(conn: asyncpg.Connection) -> None:
    set_keepalive(conn)


def caches_statements(pool: Any) -> bool:
    """Does this asyncpg pool's connections keep prepared statements (not opened with
    ``statement_cache_size=0``, as behind a transaction pooler)? asyncpg keeps a pool's
    connect options only as ``_connect_kwargs``: a pool without them is taken to cache."""
    options = getattr(pool, "_connect_kwargs", None) or {}
    return bool(options.get("statement_cache_size", 1))


async def create_worker_pool(dsn: str, **kwargs: Any) -> asyncpg.Pool:
    """The pool a worker opens from a DSN: ``create_pool`` with TCP keepalives on every
    connection it makes."""
    return await create_pool(dsn, init=_keepalive_init, **kwargs)
