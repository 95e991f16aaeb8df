"""Statements on the journal: the written history of a job's executions, and its
vocabulary (``JournalEvent``)."""

from __future__ import annotations

import enum
from typing import Any

from venturi.db import drivers
from venturi.db.drivers import Query, Row, Steps


class JournalEvent(enum.StrEnum):
    """What a journal row records; exactly the values the ``journal.event`` column's
    check allows. The first three are also read off a job's row when not written."""

    ENQUEUED = "enqueued"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    PAUSED = "paused"
    RETRIED = "retried"
    FAILED = "failed"
    DEAD = "dead"
    STALE_RECOVERED = "stale-recovered"
    RELEASED = "released"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed-out"
    # Workflows (migration 14): a run gave up its slot to wait (on what), and what woke it.
    WAITING = "waiting"
    WOKEN = "woken"


def journal_get_steps(*, job_id: int) -> Steps[list[Row]]:
    """The job's written journal rows, oldest first."""
    return (yield Query("journal_get", (job_id,)))


async def journal_get(conn: Any, *, schema: str, job_id: int) -> list[Row]:
    """``journal_get_steps`` on an async connection."""
    return await drivers.run(conn, journal_get_steps(job_id=job_id), schema=schema)
