"""Retention: the maintenance pass that deletes finished jobs after a period per status."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.status import JobStatus
from venturi.validate import seconds

log = logging.getLogger("venturi.retention")

DEFAULT_COMPLETED = 86_400.0  # 1 day
DEFAULT_DEAD = 14 * 86_400.0  # 14 days
DEFAULT_CANCELLED = 14 * 86_400.0  # like dead: an operator's decision, kept for the record
DEFAULT_WORKERS = 86_400.0  # rows of stopped (or long-gone) workers in the registry
DEFAULT_INTERVAL = 600.0
DEFAULT_BATCH = 1000


class Retention:
    """Maintenance task: deletes completed, dead and cancelled jobs (their journal goes with
    them) once they finished longer ago than their status's period; ``None`` keeps that
    status forever. ``workers``: the registry's rows of workers stopped (or silent) that
    long, unless they still hold claims (a worker also prunes a day's worth as it
    starts).

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
        workers: timedelta | float | None = DEFAULT_WORKERS,
        interval: timedelta | float = DEFAULT_INTERVAL,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self.periods: dict[str, float | None] = {
            status: None if value is None else seconds(value, f"retention {status}")
            for status, value in (
                (JobStatus.COMPLETED, completed),
                (JobStatus.DEAD, dead),
                (JobStatus.CANCELLED, cancelled),
            )
        }
        self.workers = None if workers is None else seconds(workers, "retention workers")
        self.interval = seconds(interval, "retention interval")
        validate.integer(batch, "retention batch")
        self.batch = batch

    def __repr__(self) -> str:
        kept = ", ".join(f"{s}={p if p is None else f'{p:g}s'}" for s, p in self.periods.items())
        return f"<venturi.Retention {kept} every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        if self.workers is not None:
            pruned = await db.workers.worker_prune(
                pool, schema=worker.schema, older_than=self.workers
            )
            if pruned:
                worker.stats["retention_deleted:workers"] += pruned
        for status, period in self.periods.items():
            if period is None:
                continue
            # The operators' purge pass: batches of `batch` rows, each its own transaction.
            deleted = await db.operations.job_purge_all(
                pool,
                schema=worker.schema,
                status=status,
                older_than=period,
                kind=None,
                batch=self.batch,
            )
            if deleted:
                worker.stats[f"retention_deleted:{status}"] += deleted
                log.info(
                    "retention: deleted %d %s job(s) finished more than %gs ago",
                    deleted,
                    status,
                    period,
                )
