"""The dashboard's search index: the maintenance pass that indexes finished jobs.

A search (``venturi.admin.search``) reads the finished jobs the index holds through its
GIN index and every other job row by row; this pass keeps the others few. It indexes
jobs once they are finished (their words no longer change), in batches that are each a
short transaction of their own, beside the claim loop and never on it: the worker's
enqueue, claim and settlement write nothing for it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.db.search import INDEX_BATCH, INDEX_MARGIN, INDEX_PATIENCE
from venturi.validate import seconds

log = logging.getLogger("venturi.search")

DEFAULT_INTERVAL = 2.0
# A run stops after this long even when behind (a database of a million finished jobs
# that predates the index), so that the worker's other maintenance keeps its turn.
DEFAULT_BUDGET = 1.0


class SearchIndex:
    """Maintenance task: indexes the jobs finished since its last run for the dashboard's
    search, ``batch`` per transaction, for at most ``budget`` seconds a run. ``venturi
    worker`` runs it; one worker of a fleet is enough, and many are safe: a run that finds
    another worker's run at it does nothing. ``patience``: the oldest open transaction
    in the database it waits for (a job finishing in it keeps its finished_at, its
    transaction's start), in seconds."""

    name = "search_index"

    def __init__(
        self,
        *,
        interval: timedelta | float = DEFAULT_INTERVAL,
        batch: int = INDEX_BATCH,
        budget: timedelta | float = DEFAULT_BUDGET,
        patience: timedelta | float = INDEX_PATIENCE,
    ) -> None:
        self.interval = seconds(interval, "search index interval")
        self.batch = validate.integer(batch, "search index batch")
        self.budget = seconds(budget, "search index budget")
        self.patience = seconds(patience, "search index patience")

    def __repr__(self) -> str:
        return f"<venturi.maintenance.SearchIndex every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        try:
            jobs, caught_up = await db.search.job_search_index_all(
                pool,
                batch=self.batch,
                patience=self.patience,
                margin=INDEX_MARGIN,
                budget=self.budget,
                schema=worker.schema,
            )
        # A lost connection or a restarting server: each batch is its own transaction, so
        # the next run resumes from the watermark; one line, as the claim loop says it
        # (venturi worker runs this pass in every worker: no traceback for a network blip).
        except db.errors.RETRYABLE as exc:
            worker.stats["search_index_interrupted"] += 1
            log.warning(
                "search index: pass interrupted (%s); the next run resumes", db.errors.one_line(exc)
            )
            return
        if jobs:
            worker.stats["search_indexed"] += jobs
            log.debug("search index: indexed %d finished job(s)", jobs)
        if not caught_up:
            log.info("search index: %d job(s) indexed, more to go at the next run", jobs)
