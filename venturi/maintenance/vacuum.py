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
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.validate import seconds

log = logging.getLogger("venturi.vacuum")

DEFAULT_INTERVAL = 5.0
# Dead row versions of the live table that make a run vacuum: a few seconds of a busy
# worker's claims and completions, and nothing an idle queue reaches.
DEFAULT_DEAD = 20_000


class Vacuum:
    """Maintenance task: every ``interval`` seconds, ``VACUUM`` the live table (``jobs``)
    when PostgreSQL's statistics count at least ``dead`` dead row versions in it since its
    last vacuum. ``venturi worker`` runs it; many workers are safe (a vacuum that finds
    another at the table skips it, and the count it reads falls to zero once one has
    run). It needs the role to own the table (or be a member of its owner's role): when
    it does not, it says so once and does nothing, and autovacuum alone keeps the table
    (see docs/maintenance.md, "The live table's vacuum")."""

    name = "vacuum"

    def __init__(
        self, *, interval: timedelta | float = DEFAULT_INTERVAL, dead: int = DEFAULT_DEAD
    ) -> None:
        self.interval = seconds(interval, "vacuum interval")
        self.dead = validate.integer(dead, "vacuum dead")
        # None until the first run has asked whether this role may vacuum the table.
        self.allowed: bool | None = None

    def __repr__(self) -> str:
        return f"<venturi.maintenance.Vacuum every {self.interval:g}s past {self.dead} dead>"

    async def run(self, pool: Any, worker: Any) -> None:
        schema = worker.schema
        try:
            async with pool.acquire() as conn:
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
                await db.operations.job_vacuum(conn, schema=schema)
        # A vacuum interrupted loses nothing: the next run starts another.
        except db.errors.RETRYABLE as exc:
            worker.stats["vacuum_interrupted"] += 1
            log.warning("vacuum: interrupted (%s); the next run goes on", db.errors.one_line(exc))
            return
        worker.stats["vacuum_runs"] += 1
        log.debug("vacuum: %s.jobs vacuumed at %d dead row versions", schema, dead)
