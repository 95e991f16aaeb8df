"""Job results: reading them back, and the maintenance pass that forgets expired ones.

``venturi.complete(result)`` stores a result with the job. A task declared with
``result_ttl`` keeps it readable for that long after the job completed: ``get_result``
stops returning it then, and ``ResultCleanup`` clears it from the row.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, registry, validate
from venturi.codecs import decode_any
from venturi.db.conn import Conn
from venturi.sql import DEFAULT_SCHEMA
from venturi.validate import seconds

log = logging.getLogger("venturi.results")

DEFAULT_CLEANUP_INTERVAL = 300.0
DEFAULT_CLEANUP_BATCH = 1000


async def get_result(conn: Conn, job_id: int, *, schema: str = DEFAULT_SCHEMA) -> Any:
    """The result a completed job stored (decoded JSON), or None: when the job does not
    exist, has not completed, stored no result, or its task's ``result_ttl`` has passed.

    ``get_job`` tells these cases apart. The TTL is the one the task declares in this
    process; a kind this process does not know keeps its result until it is cleared.
    """
    row = await db.jobs.job_result_get(conn, schema=schema, job_id=job_id)
    if row is None or row["status"] != "completed" or row["result"] is None:
        return None
    task = registry.registered().get(row["kind"])
    ttl = None if task is None else task.result_ttl
    if ttl is not None and (row["finished_seconds_ago"] or 0.0) > ttl:
        return None
    return decode_any(row["result"])


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
        tasks = registry.registered()
        ttls = {
            kind: ttl
            for kind in worker.kinds
            if (t := tasks.get(kind)) is not None and (ttl := t.result_ttl) is not None
        }
        total = 0
        for kind, ttl in sorted(ttls.items()):
            while True:
                n = await db.jobs.job_result_clear_expired(
                    pool, schema=worker.schema, kind=kind, ttl=ttl, batch=self.batch
                )
                total += n
                if n < self.batch:
                    break
        if total:
            worker.stats["results_cleared"] += total
            log.info("result cleanup: cleared %d expired result(s)", total)
