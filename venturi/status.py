"""A job's status as a type, and the constants every layer shares.

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


# Every status, in the order operators read them (the CLI's and the dashboard's columns).
STATUSES: tuple[JobStatus, ...] = tuple(JobStatus)

# The statuses a job never leaves by itself: retention, results and `wait` key on them.
FINISHED: frozenset[JobStatus] = frozenset(
    {JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED}
)

# A worker that has not beaten its heartbeat for this long (seconds) counts as gone: the
# fleet views, the unserved-kinds alert and the gauges all judge liveness with it.
DEFAULT_LIVENESS = 30.0
