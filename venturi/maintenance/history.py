"""The history table: the maintenance pass that moves finished jobs out of the live table.

The live table ``jobs`` then holds the unfinished jobs and those finished since the last
pass, whatever the retention period: the claim, the settlements and vacuum work on a table
the size of the live work, and ``Retention`` deletes from the history, away from them.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.db.operations import MOVE_BATCH
from venturi.validate import seconds

log = logging.getLogger("venturi.history")

DEFAULT_INTERVAL = 1.0
# A run stops after this long even when behind (a database that predates the history
# table, with a million finished jobs in the live one), so that the worker's other
# maintenance keeps its turn; the next run goes on.
DEFAULT_BUDGET = 1.0


class History:
    """Maintenance task: moves the jobs finished more than ``after`` seconds ago from the
    live table to ``jobs_history``, ``batch`` per transaction, for at most ``budget``
    seconds a run, every ``interval``. ``venturi worker`` runs it; one worker of a fleet
    is enough, and many are safe (each batch skips rows another holds). Every read
    (``venturi.get_job``, ``venturi.wait``, results, the journal, the dashboard, the CLI)
    sees a job the same wherever it is."""

    name = "history"

    def __init__(
        self,
        *,
        interval: timedelta | float = DEFAULT_INTERVAL,
        after: timedelta | float = 0.0,
        batch: int = MOVE_BATCH,
        budget: timedelta | float = DEFAULT_BUDGET,
    ) -> None:
        self.interval = seconds(interval, "history interval")
        self.after = seconds(after, "history after", allow_zero=True)
        self.batch = validate.integer(batch, "history batch")
        self.budget = seconds(budget, "history budget")

    def __repr__(self) -> str:
        return f"<venturi.maintenance.History every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        try:
            jobs, caught_up = await db.operations.job_history_move_all(
                pool, after=self.after, batch=self.batch, budget=self.budget, schema=worker.schema
            )
        # Each batch is its own transaction: an interrupted pass loses nothing, and the
        # next run goes on (one line, as the claim loop says it: no traceback for a blip).
        except db.errors.RETRYABLE as exc:
            worker.stats["history_interrupted"] += 1
            log.warning(
                "history: pass interrupted (%s); the next run goes on", db.errors.one_line(exc)
            )
            return
        if jobs:
            worker.stats["history_moved"] += jobs
            log.debug("history: moved %d finished job(s)", jobs)
        if not caught_up:
            log.info("history: %d job(s) moved, more to go at the next run", jobs)
