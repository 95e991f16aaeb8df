"""Job results: the maintenance pass that forgets expired ones.

``venturi.complete(result)`` stores a result with the job. A task declared with
``result_ttl`` keeps it readable for that long after the job completed: ``get_result``
(in ``venturi.jobs``, beside the other reads) stops returning it then, and
``ResultCleanup`` clears it from the row.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.tasks import registered
from venturi.validate import seconds

log = logging.getLogger("venturi.results")

DEFAULT_CLEANUP_INTERVAL = 300.0
DEFAULT_CLEANUP_BATCH = 1000


class ResultCleanup:
    """Maintenance task: clears the stored results of completed jobs whose task's
    ``result_ttl`` has passed, for the kinds the worker runs.

    Clears ``batch`` rows per statement, each its own short transaction, until a batch
    comes back short. Safe in many workers at once: each batch skips rows another worker
    has locked (``SKIP LOCKED``).
    """

    name = "result_cleanup"

    def __init__(
        self,
        *,
        interval: timedelta | float = DEFAULT_CLEANUP_INTERVAL,
        batch: int = DEFAULT_CLEANUP_BATCH,
    ) -> None:
        self.interval = seconds(interval, "result_cleanup interval")
        self.batch = validate.integer(batch, "result_cleanup batch")

    def __repr__(self) -> str:
        return f"<venturi.ResultCleanup every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        tasks = registered()
        ttls = {
            kind: ttl
            for kind in worker.kinds
            if (t := tasks.get(kind)) is not None and (ttl := t.result_ttl) is not None
        }
        total = 0
        for kind, ttl in sorted(ttls.items()):
            while True:
                n = await db.operations.job_result_clear_expired(
                    pool, schema=worker.schema, kind=kind, ttl=ttl, batch=self.batch
                )
                total += n
                if n < self.batch:
                    break
        if total:
            worker.stats["results_cleared"] += total
            log.info("result cleanup: cleared %d expired result(s)", total)
