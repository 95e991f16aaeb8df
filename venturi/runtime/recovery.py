"""Stale recovery: jobs whose claim expired (a worker presumed dead) go back to pending.

Recovery runs inside every claim (the ``_recover_cte`` of ``job_claim``: a claim first
recovers, so a dead worker's jobs are picked up by the next claim anywhere) and, while no
claim runs (every slot busy, every kind at its cap), on its own every ``poll_max`` with
``job_recover_stale``. A recovered execution counts as a failure toward its job's
backstop, with its task's backoff (the worker's for a task that declared none).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from venturi import db
from venturi.backoff import Backoff
from venturi.db.conn import Conn

log = logging.getLogger("venturi.recovery")


class Recovery:
    """When this worker last recovered expired claims, and the log of what it recovered."""

    def __init__(self, schema: str, recoverer: str, backoff: Backoff, stats: Counter[str]):
        self.schema = schema
        self.recoverer = recoverer
        self.backoff = backoff
        self.stats = stats
        # When a statement last recovered expired claims (monotonic seconds).
        self.at = 0.0

    def claiming(self) -> None:
        """A claim is about to run: it recovers first."""
        self.at = time.monotonic()

    def claimed(self, rows: list[Any]) -> None:
        """Log the expired claims a ``job_claim`` recovered."""
        for r in rows:
            log.warning(
                "recovered job %d (%s): its lease expired; worker %s presumed dead (failure "
                "%d of %d)",
                r["id"],
                r["kind"],
                r["recovered_from"],
                r["failures"],
                r["max_failures"],
                extra={"job_id": r["id"], "kind": r["kind"], "attempt": r["attempt"]},
            )

    async def recover(self, conn: Conn) -> None:
        """Recover expired claims (of any worker) without claiming."""
        self.at = time.monotonic()
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
