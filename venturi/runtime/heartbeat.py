"""The heartbeat: lease renewal, cancel requests and lost claims of running jobs."""

from __future__ import annotations

import asyncio
import logging
import time

from venturi import db
from venturi.db.conn import Conn, Source
from venturi.runtime.instruments import Instruments
from venturi.runtime.presence import Presence
from venturi.runtime.run import Run

log = logging.getLogger("venturi.worker")


class Heartbeat:
    """Every ``tick`` seconds: push the worker's row in the registry forward (one
    statement, busy or idle); and while handlers run, push forward, every third of a
    lease, the claims that renew (guarded by ownership, so a crash is still detected
    within one lease); pass operators' cancel requests to the handlers' contexts; ask a
    handler whose claim was lost to stop."""

    def __init__(
        self,
        schema: str,
        claimant: db.Claimant,
        tick: float,
        instruments: Instruments,
        inflight: dict[asyncio.Task[None], Run],
        presence: Presence,
    ) -> None:
        self.schema = schema
        self.claimant = claimant
        self.tick = tick
        self.stats = instruments.stats
        self._instruments = instruments
        self._inflight = inflight
        self._presence = presence

    async def run(self, source: Source) -> None:
        while True:
            await asyncio.sleep(self.tick)
            if not self._presence.due() and not self._inflight:
                continue  # nothing to say this tick: no connection taken
            try:
                # One connection for the tick's statements: a pool resets a connection
                # as it takes it back, a round trip per acquisition.
                async with source.acquire() as conn:
                    await self._presence.beat(conn)
                    await self.beat(conn)
            except db.errors.TRANSIENT as exc:
                self._instruments.db_error()
                log.warning("heartbeat failed (retrying): %s", db.errors.one_line(exc))

    async def beat(self, conn: Conn) -> None:
        # A run completed in its own transaction no longer holds a claim to renew.
        runs = [r for r in self._inflight.values() if r.outcome is None and not r.committed]
        if not runs:
            return
        # In id order, the order the renewals lock the rows in, as an operator's bulk
        # statements and the worker's completions lock theirs: no cycle between them.
        runs.sort(key=lambda r: (r.id, r.attempt))
        now = time.monotonic()
        # Keyed by claim (id, attempt): a job's new run may sit beside the zombie run of its
        # recovered claim in this worker (found by the chaos soak).
        due = {(r.id, r.attempt) for r in runs if r.renew and now - r.renewed >= r.lease / 3}
        try:
            rows = await db.settle.job_heartbeat_if_owned(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                ids=[r.id for r in runs],
                attempts=[r.attempt for r in runs],
                leases=[r.lease if (r.id, r.attempt) in due else None for r in runs],
            )
        except db.errors.TRANSIENT as exc:
            self.stats["db_errors"] += 1
            log.warning("heartbeat failed (retrying): %s", db.errors.one_line(exc))
            return
        by_claim = {(r.id, r.attempt): r for r in runs}
        still = {id(r) for r in self._inflight.values() if r.outcome is None}
        for row in rows:
            run = by_claim[(row["id"], row["attempt"])]
            if id(run) not in still:
                continue  # finished (and maybe settled) while we asked: nothing to say
            if row["renewed"]:
                run.renewed = now
                self.stats["leases_renewed"] += 1
            elif (run.id, run.attempt) in due or not row["owned"]:
                run.claim_lost = True
                if not run.cancelling:
                    self.stats["claims_lost"] += 1
                    log.warning(
                        "job %d (%s) lost its claim while running (lease expired and "
                        "recovered elsewhere); asking its handler to stop",
                        run.id,
                        run.task.kind,
                        extra=run.log_extra(),
                    )
                    run.ask_to_stop()
            if row["cancel_requested"] and row["owned"] and not run.cancel_requested:
                run.cancel_requested = True
                run.ask_to_stop()
                log.info(
                    "job %d (%s): cancel requested by an operator",
                    run.id,
                    run.task.kind,
                    extra=run.log_extra(),
                )
