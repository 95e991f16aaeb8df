"""Vacuum of the live table: the maintenance pass that keeps its dead row versions few.

A queue table turns over its rows all the time: each job leaves a dead row version at its
claim, at its completion and when ``History`` moves it out, and the claim's ordered scan
of the pending jobs steps over the dead entries of every claimed one until a vacuum
removes them. Autovacuum visits a database at most once per ``autovacuum_naptime`` (a
minute by default): at ten thousand jobs a second that is well over a million dead
versions between its runs, and the claims slow down as they pile up (benchmarks/
README.md, "The live table's vacuum"). This pass vacuums the live table whenever its dead
versions pass a threshold, checked every few seconds, so each vacuum is small.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.validate import seconds

log = logging.getLogger("venturi.vacuum")

DEFAULT_INTERVAL = 5.0
# Dead row versions of the live table that make a run vacuum: a few seconds of a busy
# worker's claims and completions, and nothing an idle queue reaches.
DEFAULT_DEAD = 20_000
# A vacuum is followed by at least this many times its duration without one (next_start).
DUTY = 10.0


class Vacuum:
    """Maintenance task: every ``interval`` seconds, ``VACUUM`` the live table (``jobs``)
    when PostgreSQL's statistics count at least ``dead`` dead row versions in it since its
    last vacuum. ``venturi worker`` runs it; many workers are safe (a vacuum that finds
    another at the table skips it, and the count it reads falls to zero once one has
    run), and it vacuums at most a tenth of the time (``next_start``). It needs the role
    to own the table (or be a member of its owner's role): when it does not, it says so
    once and does nothing, and autovacuum alone keeps the table (see docs/maintenance.md,
    "The live table's vacuum")."""

    name = "vacuum"

    def __init__(
        self, *, interval: timedelta | float = DEFAULT_INTERVAL, dead: int = DEFAULT_DEAD
    ) -> None:
        self.interval = seconds(interval, "vacuum interval")
        self.dead = validate.integer(dead, "vacuum dead")
        # None until the first run has asked whether this role may vacuum the table.
        self.allowed: bool | None = None
        # When the next vacuum may start (see next_start).
        self.resume_at = 0.0

    def __repr__(self) -> str:
        return f"<venturi.maintenance.Vacuum every {self.interval:g}s past {self.dead} dead>"

    def next_start(self, started: float, took: float) -> float:
        """The earliest start of the vacuum after one that started at ``started`` and took
        ``took`` seconds: ``DUTY`` times its duration later, so the task vacuums at most a
        tenth of the time (the runner calls it every ``interval`` besides). A vacuum is
        short when it can remove what it finds; one that cannot (a transaction open for
        minutes holds vacuum's horizon, and the table grows) takes longer each time, and
        vacuuming again at once would only rescan the table."""
        return started + DUTY * took

    async def run(self, pool: Any, worker: Any) -> None:
        if time.monotonic() < self.resume_at:
            return
        schema = worker.schema
        try:
            async with db.connect.pooled(pool) as conn:
                dead, allowed = await db.operations.job_vacuum_state(conn, schema=schema)
                if self.allowed is None and not allowed:
                    log.warning(
                        "vacuum: this role does not own %s.jobs and cannot vacuum it; "
                        "autovacuum alone keeps it (see docs/maintenance.md)",
                        schema,
                    )
                self.allowed = allowed
                if not allowed or dead < self.dead:
                    return
                started = time.monotonic()
                await db.operations.job_vacuum(conn, schema=schema)
                took = time.monotonic() - started
        # A vacuum interrupted loses nothing: the next run starts another.
        except db.errors.RETRYABLE as exc:
            worker.stats["vacuum_interrupted"] += 1
            log.warning("vacuum: interrupted (%s); the next run goes on", db.errors.one_line(exc))
            return
        self.resume_at = self.next_start(started, took)
        worker.stats["vacuum_runs"] += 1
        log.debug("vacuum: %s.jobs vacuumed at %d dead row versions in %.3fs", schema, dead, took)
