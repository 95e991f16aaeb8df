"""Statements on the journal: the written history of a job's executions. Its vocabulary,
``JournalEvent``, is defined in ``venturi.status`` and importable from here."""

from __future__ import annotations

from typing import Any

from venturi.db import drivers
from venturi.db.drivers import Query, Row, Steps

# The vocabulary lives beside JobStatus, which every layer may import; named here too.
from venturi.status import JournalEvent as JournalEvent


def journal_get_steps(*, job_id: int) -> Steps[list[Row]]:
    """The job's written journal rows, oldest first."""
    return (yield Query("journal_get", (job_id,)))


def job_get_with_journal_steps(*, job_id: int) -> Steps[list[Row]]:
    """The job's row and its written journal, one snapshot: a row per entry, oldest
    first (entry columns ``entry_at``, ``entry_event``, ... NULL on the one row of a job
    without entries); no rows when there is no such job."""
    return (yield Query("job_get_with_journal", (job_id,)))


async def journal_get(conn: Any, *, schema: str, job_id: int) -> list[Row]:
    """``journal_get_steps`` on an async connection."""
    return await drivers.run(conn, journal_get_steps(job_id=job_id), schema=schema)
