"""A job's order within its tier (the ``rank`` column): set in the enqueuing transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from venturi.db import drivers
from venturi.db.drivers import Query, Steps


def job_rank_set_steps(*, job_id: int, rank: int) -> Steps[datetime | None]:
    """Set the job's rank (lower runs first within its tier); its ``created_at``, or None
    when there is no such job."""
    rows = yield Query("job_rank_set", (job_id, rank))
    return rows[0]["created_at"] if rows else None


def job_rank_set_sync(conn: Any, *, schema: str, job_id: int, rank: int) -> datetime | None:
    """``job_rank_set_steps`` on a sync connection (Django's), joining its transaction."""
    return drivers.run_sync(conn, job_rank_set_steps(job_id=job_id, rank=rank), schema=schema)
