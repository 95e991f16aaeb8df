"""A job's status as a type, the journal's vocabulary, and the constants every layer
shares.

``JobStatus`` is a ``StrEnum``: its members compare equal to the strings stored in the
``status`` column, so a row read from the database and a member test equal without a
conversion, and a member binds as a query parameter as its plain string.
"""

from __future__ import annotations

import enum


class JobStatus(enum.StrEnum):
    """Where a job stands: waiting to run, running, finished one of three ways, or (a
    workflow) waiting for a timer, a signal, children or dependencies."""

    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    # A workflow that gave up its slot until what it waits for happens (SPEC 12); not
    # finished, and outside the claim's index.
    WAITING = "waiting"

    @property
    def finished(self) -> bool:
        """True for the three statuses a job never leaves by itself."""
        return self in FINISHED


class JournalEvent(enum.StrEnum):
    """What a journal row records; exactly the values the ``journal.event`` column's
    check allows. The first three are also read off a job's row when not written; an
    event that moves a job into a status is named after it."""

    ENQUEUED = "enqueued"
    CLAIMED = JobStatus.CLAIMED.value
    COMPLETED = JobStatus.COMPLETED.value
    PAUSED = "paused"
    RETRIED = "retried"
    FAILED = "failed"
    DEAD = JobStatus.DEAD.value
    STALE_RECOVERED = "stale-recovered"
    RELEASED = "released"
    CANCELLED = JobStatus.CANCELLED.value
    TIMED_OUT = "timed-out"
    # Workflows (migration 14): a run gave up its slot to wait (on what), and what woke it.
    WAITING = JobStatus.WAITING.value
    WOKEN = "woken"


# Every status, in the order operators read them (the CLI's and the dashboard's columns).
STATUSES: tuple[JobStatus, ...] = tuple(JobStatus)

# The statuses a job never leaves by itself: retention, results and `wait` key on them.
FINISHED: frozenset[JobStatus] = frozenset(
    {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}
)

# A worker that has not beaten its heartbeat for this long (seconds) counts as gone: the
# fleet views, the unserved-kinds alert and the gauges all judge liveness with it.
DEFAULT_LIVENESS = 30.0

# The journal detail of an operator's retry. Statistics (the operator's reads, the
# alerts) tell it apart from a handler's retry outcome (also journaled as 'retried') by
# this text.
MANUAL_RETRY = "manual retry"
