"""Retention: the maintenance pass that deletes finished jobs after a period per status."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import admin, validate
from venturi.validate import seconds

log = logging.getLogger("venturi.retention")

DEFAULT_COMPLETED = 86_400.0  # 1 day
DEFAULT_DEAD = 14 * 86_400.0  # 14 days
DEFAULT_CANCELLED = 14 * 86_400.0  # like dead: an operator's decision, kept for the record
DEFAULT_INTERVAL = 600.0
DEFAULT_BATCH = 1000


class Retention:
    """Maintenance task: deletes completed, dead and cancelled jobs (their journal goes with
    them) once they finished longer ago than their status's period; ``None`` keeps that
    status forever.

    Deletes ``batch`` rows per statement, oldest first, each statement its own short
    transaction, so no lock is held for long; safe in many workers at once, since each
    batch skips rows another worker (or an operator) has locked (``SKIP LOCKED``).
    """

    name = "retention"

    def __init__(
        self,
        *,
        completed: timedelta | float | None = DEFAULT_COMPLETED,
        dead: timedelta | float | None = DEFAULT_DEAD,
        cancelled: timedelta | float | None = DEFAULT_CANCELLED,
        interval: timedelta | float = DEFAULT_INTERVAL,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self.periods: dict[str, float | None] = {
            status: None if value is None else seconds(value, f"retention {status}")
            for status, value in (
                ("completed", completed),
                ("dead", dead),
                ("cancelled", cancelled),
            )
        }
        self.interval = seconds(interval, "retention interval")
        validate.integer(batch, "retention batch")
        self.batch = batch

    def __repr__(self) -> str:
        kept = ", ".join(f"{s}={p if p is None else f'{p:g}s'}" for s, p in self.periods.items())
        return f"<venturi.Retention {kept} every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        for status, period in self.periods.items():
            if period is None:
                continue
            # The operators' purge: batches of `batch` rows, each its own transaction.
            deleted = await admin.purge(
                pool, status=status, older_than=period, batch=self.batch, schema=worker.schema
            )
            if deleted:
                worker.stats[f"retention_deleted:{status}"] += deleted
                log.info(
                    "retention: deleted %d %s job(s) finished more than %gs ago",
                    deleted,
                    status,
                    period,
                )
