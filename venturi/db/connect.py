"""Opening connections and pools, and keeping passwords out of what venturi prints."""

from __future__ import annotations

import contextlib
import re
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


async def connect(dsn: str, **kwargs: Any) -> asyncpg.Connection:
    """An asyncpg connection, or ``ConnectError`` with a one-line, password-free message."""
    try:
        return await asyncpg.connect(dsn, **kwargs)
    except CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


async def create_pool(dsn: str, **kwargs: Any) -> asyncpg.Pool:
    """An asyncpg pool, or ``ConnectError`` like ``connect``."""
    try:
        return await asyncpg.create_pool(dsn, **kwargs)
    except CONNECT_ERRORS as exc:
        raise _connect_error(dsn, exc) from None


def is_pool(obj: Any) -> bool:
    """Is ``obj`` asyncpg's own Pool (not a look-alike)?"""
    return isinstance(obj, asyncpg.Pool)


def is_connection(obj: Any) -> bool:
    """Is ``obj`` asyncpg's own Connection?"""
    return isinstance(obj, asyncpg.Connection)


@contextlib.asynccontextmanager
async def transaction(conn: Any) -> AsyncIterator[TxConn]:
    """A transaction on ``conn``: a Connection's own (a savepoint when the caller's is
    open), or one on a connection taken from a Pool."""
    if hasattr(conn, "transaction"):
        async with conn.transaction():
            yield conn
        return
    async with conn.acquire() as held, held.transaction():
        yield held
