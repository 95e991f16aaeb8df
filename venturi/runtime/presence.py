"""The worker's row in the registry of workers: registered as ``Worker.run`` starts,
pushed forward on the heartbeat's cadence (one statement per tick), marked stopped by a
clean stop. Operators read it with ``venturi workers``; a row that stops being pushed
forward is a worker that is gone.

The registry is for operators and never for correctness: a failed write is logged and
tried again at the next tick, and the loop goes on. Ownership of claims stays the claim
token's (the row's id is that token), and recovery stays timeout-only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

from venturi import db
from venturi.db.conn import Conn
from venturi.version import __version__

log = logging.getLogger("venturi.worker")

# Rows of workers stopped (or silent) this long are pruned as a worker registers, so the
# table holds about a day of worker runs without anyone configuring anything.
PRUNE_AFTER = 86_400.0


def version() -> str:
    return __version__


class Presence:
    """One worker run's row (its id is the run's claim token)."""

    def __init__(
        self,
        schema: str,
        claimant: db.Claimant,
        kinds: list[str],
        concurrency: int,
        every: float,
        limits: dict[str, tuple[int | None, int | None]] | None = None,
    ) -> None:
        self.schema = schema
        self.claimant = claimant
        self.kinds = kinds
        # Each kind's (cap, global_cap), recorded with the row for operators' "why it
        # waits" (a kind left out has neither).
        self.limits = limits or {}
        self.concurrency = concurrency
        # The worker's heartbeat knob: the heartbeat may tick faster (a quarter of a
        # short renewing lease), the registry's row needs no more than this.
        self.every = every
        self.registered = False
        self.beaten = time.monotonic()

    async def register(self, conn: Conn) -> None:
        """Insert the row (and prune long-stopped ones); a failure is retried by ``beat``."""
        try:
            await db.workers.worker_register(
                conn,
                schema=self.schema,
                id=self.claimant.token,
                name=self.claimant.name,
                host=socket.gethostname(),
                pid=os.getpid(),
                kinds=self.kinds,
                concurrency=self.concurrency,
                version=version(),
                caps=[self.limits.get(k, (None, None))[0] for k in self.kinds],
                global_caps=[self.limits.get(k, (None, None))[1] for k in self.kinds],
            )
            self.registered = True
            await db.workers.worker_prune(conn, schema=self.schema, older_than=PRUNE_AFTER)
        except db.errors.TRANSIENT as exc:
            log.warning(
                "could not register in the workers table (retrying at the next heartbeat): %s",
                db.errors.one_line(exc),
            )

    def due(self) -> bool:
        return time.monotonic() - self.beaten >= self.every * 0.9

    async def beat(self, conn: Conn) -> None:
        """One statement, at most every ``every`` seconds (a little early rather than a
        tick late); registers again when the row is missing."""
        if not self.due():
            return
        self.beaten = time.monotonic()
        if not self.registered:
            await self.register(conn)
            return
        try:
            if not await db.workers.worker_heartbeat(
                conn, schema=self.schema, id=self.claimant.token
            ):
                self.registered = False
                await self.register(conn)
        except db.errors.TRANSIENT as exc:
            log.warning("worker heartbeat failed (retrying): %s", db.errors.one_line(exc))

    async def stop(self, conn: Conn) -> None:
        """Mark the clean stop; if the database is away, the row goes gone by itself."""
        try:
            async with asyncio.timeout(5):
                await db.workers.worker_stop(conn, schema=self.schema, id=self.claimant.token)
        except db.errors.TRANSIENT as exc:
            log.warning(
                "could not mark this worker stopped in the workers table: %s",
                db.errors.one_line(exc),
            )
