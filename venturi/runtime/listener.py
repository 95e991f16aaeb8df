"""The dedicated LISTEN connection that wakes the worker when work arrives."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from venturi import db
from venturi.runtime.instruments import Instruments

log = logging.getLogger("venturi.worker")

# How long between reconnect attempts: doubling, capped.
_RECONNECT_BACKOFF = db.errors.ERROR_BACKOFF

# After this long without a notification, ask the LISTEN connection whether it still
# answers: a connection that stays open while nothing comes through (a frozen pooler, a
# firewall that dropped the flow) looks exactly like a quiet queue.
PROBE_AFTER = 10.0
PROBE_DEADLINE = 5.0


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
        *,
        deadline: float | None = None,
        probe_after: float = PROBE_AFTER,
    ) -> None:
        self.pool = pool
        # The probe's deadline: the worker's statement deadline, at most PROBE_DEADLINE.
        self.probe_deadline = min(PROBE_DEADLINE, deadline or PROBE_DEADLINE)
        self.probe_after = probe_after
        self._heard = time.monotonic()
        self._health: asyncio.Task[None] | None = None
        self.conn: Any = None
        self.channel = channel
        self._on_notified = notified
        self._on_state = state
        self._instruments = instruments
        self._closing = False
        self._reconnect: asyncio.Task[None] | None = None

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._heard = time.monotonic()
        self._on_notified(payload)

    def _terminated(self, _conn: Any) -> None:
        self._on_state(False)
        if not self._closing:
            log.warning("LISTEN connection lost; reconnecting (polling meanwhile)")
            self._instruments.listen_reconnect()
            self._spawn_reconnect()

    def _reconnecting(self) -> bool:
        return self._reconnect is not None and not self._reconnect.done()

    def _spawn_reconnect(self) -> None:
        if not self._reconnecting():
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
        self._heard = time.monotonic()
        self._on_state(True)

    async def _health_loop(self) -> None:
        """Probe the LISTEN connection after ``probe_after`` seconds of silence; one that
        does not answer within the probe's deadline is closed, which reconnects it."""
        while not self._closing:
            await asyncio.sleep(max(0.0, self._heard + self.probe_after - time.monotonic()))
            conn = self.conn
            if conn is None or self._reconnecting():
                self._heard = time.monotonic()  # look again a probe interval later
                continue
            if time.monotonic() - self._heard < self.probe_after:
                continue
            try:
                async with asyncio.timeout(self.probe_deadline):
                    await db.health.connection_probe(conn)
                self._heard = time.monotonic()
            except db.errors.TRANSIENT as exc:
                if conn is not self.conn or self._closing or self._reconnecting():
                    continue  # replaced (or closing) meanwhile: not this one's news
                log.warning(
                    "LISTEN connection did not answer a probe within %.1fs (%s); reconnecting",
                    self.probe_deadline,
                    db.errors.one_line(exc),
                )
                self._instruments.stats["listen_probe_failed"] += 1
                # Closing it runs the termination listener: polling, then a reconnect.
                terminate(conn)
                self._heard = time.monotonic()

    async def start(self) -> None:
        if self._health is None:
            self._health = asyncio.create_task(self._health_loop())
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
            await db.connect.release(self.pool, conn)

    async def close(self) -> None:
        self._closing = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                # UNLISTEN is a statement: on a frozen connection it would never return.
                async with asyncio.timeout(self.probe_deadline):
                    await conn.remove_listener(self.channel, self._notified)
            except db.errors.TRANSIENT:
                terminate(conn)
            await self._drop(conn)
        self._on_state(False)


def terminate(conn: Any) -> None:
    """Close ``conn`` at once, whatever state it is in. One whose backend was terminated
    may already be closed and taken back by its pool, whose proxy then refuses every
    call, ``terminate`` included (``InterfaceError``): it is closed, which is all a stop
    needs, so a graceful stop ends cleanly whatever its connection went through."""
    with contextlib.suppress(*db.errors.TRANSIENT):
        conn.terminate()
