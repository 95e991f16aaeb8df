"""Count the statements a process sends to PostgreSQL: a TCP proxy reading the protocol.

``pg_stat_statements`` needs ``shared_preload_libraries`` (a server restart) and counts
the whole server's traffic; this counts one client's, whatever driver or layer sends it.
Point the client at ``Counter.dsn(upstream_dsn)``; every byte is passed through unchanged
both ways, and the client's messages are read on the side (protocol 3.0):

- an *executed statement* is an ``Execute`` message (extended protocol: asyncpg, psycopg
  with parameters) or a ``Query`` message (simple protocol: ``BEGIN``, ``LISTEN``, a
  statement without parameters);
- each is named by its text's first line when it is a venturi header (``-- job_claim:
  ...`` -> ``job_claim``), else by its first 60 characters, so a run can be broken down
  by statement;
- ``Parse`` messages (preparing, not executing) are counted apart.

The client must not negotiate TLS through it (``dsn`` sets ``sslmode=disable``).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections import Counter as Tally
from urllib.parse import urlsplit, urlunsplit

# Untyped first messages: SSLRequest, GSSENCRequest, CancelRequest (then StartupMessage).
_NEGOTIATION = {80877103, 80877104, 80877102}


# Statements drivers send of their own, by how they begin.
_DRIVERS = {
    "SELECT pg_advisory_unlock_all(); CLOSE ALL;": "asyncpg Pool release's reset",
    "WITH RECURSIVE typeinfo_tree": "asyncpg type introspection",
}


def statement_name(query: str) -> str:
    first = query.lstrip().split("\n", 1)[0]
    if first.startswith("-- ") and ":" in first:
        return first[3:].split(":", 1)[0].strip()
    flat = " ".join(query.split())
    for start, name in _DRIVERS.items():
        if flat.startswith(start):
            return name
    return flat[:60]


class _Reader:
    """Parses one client's stream of messages as it passes."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.buf = b""
        self.started = False
        self.statements: dict[bytes, str] = {}
        self.portals: dict[bytes, bytes] = {}

    def feed(self, data: bytes) -> None:
        self.buf += data
        while True:
            if not self.started:
                if len(self.buf) < 8:
                    return
                (size,) = struct.unpack("!I", self.buf[:4])
                if len(self.buf) < size:
                    return
                (code,) = struct.unpack("!I", self.buf[4:8])
                self.buf = self.buf[size:]
                self.started = code not in _NEGOTIATION
                continue
            if len(self.buf) < 5:
                return
            kind = self.buf[:1]
            (size,) = struct.unpack("!I", self.buf[1:5])
            if len(self.buf) < 1 + size:
                return
            body, self.buf = self.buf[5 : 1 + size], self.buf[1 + size :]
            self._message(kind, body)

    def _message(self, kind: bytes, body: bytes) -> None:
        if kind == b"Q":
            self.counter.executed[statement_name(body.split(b"\0", 1)[0].decode())] += 1
        elif kind == b"P":
            name, rest = body.split(b"\0", 1)
            self.statements[name] = rest.split(b"\0", 1)[0].decode()
            self.counter.parses += 1
        elif kind == b"B":
            portal, rest = body.split(b"\0", 1)
            self.portals[portal] = rest.split(b"\0", 1)[0]
        elif kind == b"E":
            portal = body.split(b"\0", 1)[0]
            query = self.statements.get(self.portals.get(portal, b""), "?")
            self.counter.executed[statement_name(query)] += 1


class Counter:
    """A proxy in front of one PostgreSQL server, counting what its clients execute."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.executed: Tally[str] = Tally()
        self.parses = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()

    def reset(self) -> None:
        self.executed.clear()
        self.parses = 0

    def total(self) -> int:
        return sum(self.executed.values())

    def dsn(self, upstream_dsn: str) -> str:
        """``upstream_dsn`` with its host and port replaced by the proxy's, TLS off."""
        parts = urlsplit(upstream_dsn)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        query = "&".join(q for q in [parts.query, "sslmode=disable"] if q)
        return urlunsplit(
            (parts.scheme, f"{auth}127.0.0.1:{self.port}", parts.path, query, parts.fragment)
        )

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        parser = _Reader(self)

        async def client_to_server() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                parser.feed(data)
                await up_writer.drain()
            up_writer.close()

        async def server_to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        with contextlib.suppress(Exception):
            await asyncio.gather(client_to_server(), server_to_client())
        for w in (writer, up_writer):
            w.close()
