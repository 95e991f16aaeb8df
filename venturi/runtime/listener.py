"""The dedicated LISTEN connection that wakes the worker when work arrives."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from venturi import db
from venturi.runtime.instruments import Instruments

log = logging.getLogger("venturi.worker")

# How long between reconnect attempts: doubling, capped.
_RECONNECT_BACKOFF = db.errors.ERROR_BACKOFF


class Listener:
    """Listens on ``channel`` on a connection of ``pool``; reconnects with backoff when it
    drops, while the loop polls at least every second to cover the gap.

    ``notified(payload)`` gets every notification; ``state(up)`` hears when listening
    starts (work may have arrived meanwhile) and stops."""

    def __init__(
        self,
        pool: Any,
        channel: str,
        notified: Callable[[str], None],
        state: Callable[[bool], None],
        instruments: Instruments,
    ) -> None:
        self.pool = pool
        self.conn: Any = None
        self.channel = channel
        self._on_notified = notified
        self._on_state = state
        self._instruments = instruments
        self._closing = False
        self._reconnect: asyncio.Task[None] | None = None

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_notified(payload)

    def _terminated(self, _conn: Any) -> None:
        self._on_state(False)
        if not self._closing:
            log.warning("LISTEN connection lost; reconnecting (polling meanwhile)")
            self._instruments.listen_reconnect()
            self._spawn_reconnect()

    def _spawn_reconnect(self) -> None:
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.create_task(self._reconnect_loop())

    async def _connect(self) -> None:
        conn = await self.pool.acquire()
        try:
            await conn.add_listener(self.channel, self._notified)
            conn.add_termination_listener(self._terminated)
        except BaseException:
            await self._drop(conn)
            raise
        self.conn = conn
        self._on_state(True)

    async def start(self) -> None:
        try:
            await self._connect()
        except db.errors.TRANSIENT as exc:
            log.warning(
                "LISTEN connection failed (%s); polling until it is back",
                db.errors.one_line(exc),
            )
            self._spawn_reconnect()

    async def _reconnect_loop(self) -> None:
        if self.conn is not None:
            old, self.conn = self.conn, None
            await self._drop(old)
        attempt = 0
        while not self._closing:
            attempt += 1
            await asyncio.sleep(_RECONNECT_BACKOFF.delay(attempt))
            try:
                await self._connect()
                log.info("LISTEN connection restored")
                return
            except db.errors.TRANSIENT as exc:
                log.debug("LISTEN reconnect failed: %s", db.errors.one_line(exc))

    async def _drop(self, conn: Any) -> None:
        # Releasing resets the connection (UNLISTEN included) or, if it is broken, lets
        # the pool replace it.
        with contextlib.suppress(*db.errors.TRANSIENT):
            await self.pool.release(conn, timeout=2)

    async def close(self) -> None:
        self._closing = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self.conn is not None:
            conn, self.conn = self.conn, None
            with contextlib.suppress(*db.errors.TRANSIENT):
                await conn.remove_listener(self.channel, self._notified)
            await self._drop(conn)
        self._on_state(False)
