"""A TCP proxy on loopback between clients and PostgreSQL, for network faults.

One ``Proxy`` listens on ``127.0.0.1`` (a free port) and forwards each accepted
connection to one upstream address. Every connection (a ``Link``) has a mode, set for it
alone or for all at once, and new connections start in the proxy's default mode:

- ``pass``: forward bytes as they come;
- ``delay``: hold every chunk a given time (a number, or a ``(low, high)`` range drawn
  per chunk) before forwarding it, keeping the byte order; by default only the
  client-to-server direction, so a round trip pays one delay;
- ``blackhole``: forward nothing in either direction and keep both sockets open, as a
  frozen server or a firewall that silently forgot the flow: nothing is read, nothing
  is sent, nothing is closed (the bytes stay queued in the kernel; back in ``pass`` they
  flow again);
- ``drop``: close both sockets (a FIN each way);
- ``reset``: abort both sockets with an RST (``SO_LINGER`` 0).

``drop`` and ``reset`` act on the connections open when they are called; they are not a
default mode. The proxy keeps, per link, when it opened and when (and by which side) it
closed, which is how a scenario measures how long a client took to give up on a
black-holed connection. A ``Twin`` is one client's proxies to each host of a multi-host
DSN (a primary and its standby), which a fault then applies to together.

Controlled in-process::

    proxy = await Proxy.start("127.0.0.1", 5432)
    proxy.blackhole()             # every open connection, and new ones
    proxy.blackhole(new=False)    # the open ones only: new connections pass
    proxy.reset(proxy.links[:1])  # one connection
    proxy.delay((0.05, 0.5))
    proxy.restore()               # pass, all of them and new ones
    await proxy.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["pass", "delay", "blackhole"]
Delay = float | tuple[float, float]

CHUNK = 65536


@dataclass
class Stats:
    chunks_up: int = 0  # client -> server
    chunks_down: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    delayed: int = 0  # chunks held back by a delay


@dataclass(eq=False)
class Link:
    """One proxied connection."""

    n: int
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    mode: Mode = "pass"
    delay: Delay = 0.0
    both_ways: bool = False
    opened: float = field(default_factory=time.time)
    closed: float | None = None
    closed_by: str | None = None  # "client", "server", "proxy"
    blackholed_at: float | None = None
    stats: Stats = field(default_factory=Stats)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        return self.closed is None

    def gone(self) -> bool:
        return self.closed is not None

    def held(self) -> bool:
        """Black-holed and still open: forward nothing for now. (A method, not a test of
        ``mode`` inline: the mode changes while a pump awaits.)"""
        return self.mode == "blackhole" and self.closed is None

    def set_mode(self, mode: Mode, delay: Delay = 0.0, both_ways: bool = False) -> None:
        if mode == "blackhole" and self.mode != "blackhole":
            self.blackholed_at = time.time()
        self.mode, self.delay, self.both_ways = mode, delay, both_ways
        # Wake the pumps waiting out a black-hole so they see the new mode.
        self.changed.set()
        self.changed = asyncio.Event()

    def _close(self, by: str, abort: bool = False) -> None:
        if self.closed is None:
            self.closed, self.closed_by = time.time(), by
            self.ended.set()
        for w in (self.client, self.server):
            if abort:
                sock = w.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        # Linger on, timeout 0: close() sends an RST and drops the buffer.
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                w.transport.abort()
            else:
                w.close()
        self.changed.set()


class Proxy:
    def __init__(self, host: str, port: int, seed: int | None = None) -> None:
        self.upstream = (host, port)
        self.links: list[Link] = []
        self.mode: Mode = "pass"
        self._delay: Delay = 0.0
        self._both_ways = False
        self.rng = random.Random(seed)
        self.server: asyncio.Server | None = None
        self.port = 0
        self.refused = 0  # connections the upstream refused

    @classmethod
    async def start(cls, host: str, port: int, seed: int | None = None) -> Proxy:
        proxy = cls(host, port, seed)
        proxy.server = await asyncio.start_server(proxy._accept, "127.0.0.1", 0)
        proxy.port = proxy.server.sockets[0].getsockname()[1]
        return proxy

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def dsn(self, dsn: str) -> str:
        """``dsn`` (a ``postgresql://user@host:port/db...`` URI) pointed at the proxy."""
        scheme, rest = dsn.split("://", 1)
        netloc, _, tail = rest.partition("/")
        user, _, _hosts = netloc.rpartition("@")
        return f"{scheme}://{user + '@' if user else ''}{self.address}/{tail}"

    def open_links(self) -> list[Link]:
        return [link for link in self.links if link.is_open]

    # --- control --------------------------------------------------------------------

    def _targets(self, links: Iterable[Link] | None) -> list[Link]:
        return self.open_links() if links is None else [x for x in links if x.is_open]

    def _set(
        self,
        mode: Mode,
        links: Iterable[Link] | None,
        new: bool,
        delay: Delay = 0.0,
        both_ways: bool = False,
    ) -> None:
        if links is None and new:
            self.mode, self._delay, self._both_ways = mode, delay, both_ways
        for link in self._targets(links):
            link.set_mode(mode, delay, both_ways)

    def restore(self, links: Iterable[Link] | None = None, new: bool = True) -> None:
        """Back to ``pass`` (for ``links``, or all and the default)."""
        self._set("pass", links, new)

    def delay(
        self,
        seconds: Delay,
        links: Iterable[Link] | None = None,
        new: bool = True,
        both_ways: bool = False,
    ) -> None:
        self._set("delay", links, new, seconds, both_ways)

    def blackhole(self, links: Iterable[Link] | None = None, new: bool = True) -> None:
        self._set("blackhole", links, new)

    def drop(self, links: Iterable[Link] | None = None) -> int:
        targets = self._targets(links)
        for link in targets:
            link._close("proxy")
        return len(targets)

    def reset(self, links: Iterable[Link] | None = None) -> int:
        targets = self._targets(links)
        for link in targets:
            link._close("proxy", abort=True)
        return len(targets)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for link in self.open_links():
            link._close("proxy", abort=True)
        tasks = [t for link in self.links for t in link.tasks]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.wait_closed()

    # --- forwarding ---------------------------------------------------------------------

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self.refused += 1
            c_writer.transport.abort()
            return
        link = Link(len(self.links) + 1, c_writer, s_writer)
        link.set_mode(self.mode, self._delay, self._both_ways)
        self.links.append(link)
        link.tasks = [
            asyncio.create_task(self._pump(link, c_reader, s_writer, up=True)),
            asyncio.create_task(self._pump(link, s_reader, c_writer, up=False)),
        ]

    def _draw(self, d: Delay) -> float:
        return self.rng.uniform(*d) if isinstance(d, tuple) else d

    async def _pump(
        self,
        link: Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up: bool,
    ) -> None:
        side = "client" if up else "server"
        due = 0.0  # when the previous chunk left: delayed chunks keep their order
        try:
            while not link.gone():
                # A black-hole: read nothing and send nothing until the mode changes.
                while link.held():
                    await link.changed.wait()
                if link.gone():
                    return
                chunk = await reader.read(CHUNK)
                if not chunk:
                    link._close(side)
                    return
                if up:
                    link.stats.chunks_up += 1
                    link.stats.bytes_up += len(chunk)
                else:
                    link.stats.chunks_down += 1
                    link.stats.bytes_down += len(chunk)
                if link.mode == "delay" and (up or link.both_ways):
                    link.stats.delayed += 1
                    due = max(due, time.monotonic() + self._draw(link.delay))
                    # stays: the injected latency is this fault's point
                    await asyncio.sleep(due - time.monotonic())
                # A chunk read just before a black-hole began is held too.
                while link.held():
                    await link.changed.wait()
                if link.gone():
                    return
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            link._close(side, abort=True)
        except asyncio.CancelledError:
            link._close("proxy", abort=True)
            raise


class Twin:
    """A worker's two proxies, one to each host of the primary/standby pair, behind one
    multi-host DSN: faults apply to both."""

    def __init__(self, proxies: list[Proxy]) -> None:
        self.proxies = proxies

    @classmethod
    async def start(cls, ports: list[int], seed: int) -> Twin:
        return cls([await Proxy.start("127.0.0.1", p, seed * 10 + i) for i, p in enumerate(ports)])

    @property
    def links(self) -> list[Any]:
        return [x for p in self.proxies for x in p.links]

    def open_links(self) -> list[Any]:
        return [x for p in self.proxies for x in p.open_links()]

    def dsn(self, own: str) -> str:
        scheme, rest = own.split("://", 1)
        netloc, _, tail = rest.partition("/")
        user, _, _hosts = netloc.rpartition("@")
        hosts = ",".join(p.address for p in self.proxies)
        return f"{scheme}://{user + '@' if user else ''}{hosts}/{tail}"

    def blackhole(self, links: Any = None, new: bool = True) -> None:
        for p in self.proxies:
            p.blackhole(links, new)

    def restore(self, links: Any = None, new: bool = True) -> None:
        for p in self.proxies:
            p.restore(links, new)

    def delay(self, seconds: Any) -> None:
        for p in self.proxies:
            p.delay(seconds)

    async def close(self) -> None:
        for p in self.proxies:
            await p.close()
