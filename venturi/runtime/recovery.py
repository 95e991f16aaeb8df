"""Stale recovery: jobs whose claim expired (a worker presumed dead) go back to pending.

Every worker recovers on a timer of its own, beside the loop (like the heartbeat), with
``job_recover_stale``: every ``every`` seconds from its start, at most ``RECOVER_EVERY``
and at most ``poll_max``, whatever the loop is doing (claiming, every
slot busy, every kind at its cap, idle). So while any worker of the schema runs, an
expired claim is recovered at most ``every`` seconds (plus a statement's time) after its
lease ran out. The claim itself no longer recovers: it is the pickup path, and a
recovery statement with nothing to recover costs every claim its plan's extra nodes.

Every worker runs it; there is no leader to elect or lose. Concurrent recoveries are
correct (each takes only expired rows no other holds, ``FOR UPDATE SKIP LOCKED``, and a
row recovered by one is no longer claimed when the next looks) and cheap when there is
nothing to recover (the head of ``jobs_stale_idx``, no write, no WAL flush): one such
statement per worker per second. Each sleep is jittered within the period so that a
fleet started together does not recover in lockstep.

A recovered execution counts as a failure toward its job's backstop, with its task's
backoff (the worker's for a task that declared none); the recovered job's notification
(it is pending again) wakes the loops that can run it.

After each recovery the timer runs the loop's looks (``Loop.look``): due workflow timers,
kinds that got groups, the groups' weights, token wake-ups made at a slower group rate
than this worker's. A busy loop finds none of them by itself,
and on the loop's own connection each was a round trip between two claims, which carry
the finished jobs' completions.

About once a minute the same timer also looks for groups left out of the claim
(``group_wake_stranded``): a group with a job visible now that is neither ready, paused,
nor due a wake-up. The grouped claim never leaves one so (docs/groups.md, "Why no
grouped job is left behind"), so one found is a bug, woken and logged as a warning; the
look is a probe per group with pending jobs, and nothing on a queue without groups.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from venturi import db
from venturi.backoff import Backoff
from venturi.db.conn import Conn, Source
from venturi.runtime.instruments import Instruments

log = logging.getLogger("venturi.recovery")

# The longest a worker waits between two recoveries (poll_max, if shorter, bounds it too).
RECOVER_EVERY = 1.0

# A recovery statement takes at most this many expired claims (the LIMIT of
# _recover_cte.sql.j2): one that took as many runs again at once.
RECOVER_BATCH = 1000


# How often a worker looks for groups left out of the claim (each wait jittered).
STRANDED_EVERY = 60.0


def recover_every(poll_max: float) -> float:
    """The period of a worker's recovery: ``min(poll_max, RECOVER_EVERY)`` seconds."""
    return min(poll_max, RECOVER_EVERY)


class Recovery:
    """A worker's recovery of expired claims (any worker's), on its own timer."""

    def __init__(
        self,
        schema: str,
        recoverer: str,
        backoff: Backoff,
        instruments: Instruments,
        every: float,
    ) -> None:
        self.schema = schema
        self.recoverer = recoverer
        self.backoff = backoff
        self.stats: Counter[str] = instruments.stats
        self._instruments = instruments
        self.every = every
        self.stranded_at = time.monotonic() + STRANDED_EVERY * random.uniform(0.5, 1.0)

    async def run(self, source: Source, looks: Callable[[Conn], Awaitable[None]]) -> None:
        """Recover every ``every`` seconds (each wait jittered between 3/4 of it and all
        of it), the first time one period after the start, until cancelled: the loop's
        first claim, not the recovery, takes the pool's first connection (opening a
        second one delayed the first pickup), and a fleet started together does not
        recover in step. Each time, the loop's ``looks`` follow (``Loop.look``). A
        database error is logged and retried at the next period."""
        while True:
            await asyncio.sleep(self.every * random.uniform(0.75, 1.0))
            try:
                async with source.acquire() as conn:
                    await self.recover(conn)
                    if time.monotonic() >= self.stranded_at:
                        await self.wake_stranded(conn)
                    await looks(conn)
            except db.errors.TRANSIENT as exc:
                self._instruments.db_error()
                log.warning("stale recovery failed (retrying): %s", db.errors.one_line(exc))

    async def recover(self, conn: Conn) -> int:
        """Recover every expired claim there is now, a batch at a time; how many."""
        total = 0
        while True:
            rows = await db.claims.job_recover_stale(
                conn, schema=self.schema, recoverer=self.recoverer, backoff=self.backoff
            )
            for row in rows:
                self.stats["recovered"] += 1
                log.warning(
                    "recovered job %d (%s): its lease expired; worker %s presumed dead (now %s)",
                    row["id"],
                    row["kind"],
                    row["claimed_by"] or "?",
                    row["status"],
                    extra={"job_id": row["id"], "kind": row["kind"], "attempt": row["attempt"]},
                )
            total += len(rows)
            if len(rows) < RECOVER_BATCH:
                return total

    async def wake_stranded(self, conn: Conn) -> int:
        """Wake the groups left out of the claim (see the module's docstring); how many."""
        # The next look is set first: one that fails (a deadline) waits its period too.
        self.stranded_at = time.monotonic() + STRANDED_EVERY * random.uniform(0.75, 1.0)
        rows = await db.groups.group_wake_stranded(conn, schema=self.schema)
        for row in rows:
            self.stats["groups_stranded"] += 1
            log.warning(
                "group %s of %s had a job to claim but was neither ready nor due a "
                "wake-up; woken (a bug: please report it with this line): job %s visible "
                "since %s; the group's row: xmin %s, claims %s, head %s, vtime %s",
                row["grp"],
                row["kind"],
                row["job_id"],
                row["visible_at"],
                row["row_xmin"],
                row["claims"],
                row["head"],
                row["vtime"],
                extra={"kind": row["kind"], "group": row["grp"], "job_id": row["job_id"]},
            )
        return len(rows)
