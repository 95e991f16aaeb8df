"""One claimed job while its handler runs and until it is settled."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from venturi.context import JobMeta
from venturi.priority import Priority
from venturi.runtime.settlement import Completed, Settlement
from venturi.tasks import Task

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Priority(n) goes through EnumMeta.__call__ (about a microsecond); the tier by its value.
_PRIORITY = {int(p): p for p in Priority}


# Slots: a run is made per job; with slots its construction costs about half (issue 38,
# 1.9 -> 1.0 us by timeit), and nothing adds attributes of its own to a run.
@dataclass(eq=False, slots=True)
class Run:
    """One claimed job while its handler runs and until it is settled."""

    task: Task[Any]
    id: int
    attempt: int
    failures: int
    carry_text: str
    priority: int
    # When the job was enqueued, in microseconds since 1970 (UTC): the claim returns it as
    # an integer, which the driver decodes without the Python arithmetic a timestamp
    # costs it (1.3 us a row on a slow machine), and ``meta`` makes the datetime only for
    # a handler that reads ``ctx.job`` (issue 38).
    created_us: int
    lease: float = 0.0
    renew: bool = False
    # The W3C traceparent stored at enqueue (OpenTelemetry), if any.
    traceparent: str | None = None
    # The job's group (SPEC 13), for ctx.job and the children it spawns.
    group: str | None = None
    started: float = field(default_factory=time.monotonic)
    renewed: float = field(default_factory=time.monotonic)
    # An operator asked to cancel this job (cancel_requested_at, seen by the heartbeat).
    cancel_requested: bool = False
    # The heartbeat found the claim gone (recovered elsewhere after its lease expired).
    claim_lost: bool = False
    # Set, to the reason, before the worker cancels the handler's task: only such a
    # cancellation is a release; a CancelledError the handler raises on its own is a
    # failure like any other exception.
    stopped: str | None = None
    # The worker asked the handler to stop at a safe point (shutdown, an operator's
    # cancel): ``ctx.is_cancelled()``. Its event, for ``ctx.cancelled()``, is made only
    # when a handler waits on it (``cancel_event``): most never do (issue 38).
    cancelling: bool = False
    _cancel: asyncio.Event | None = None
    # How it ended, once the handler has.
    outcome: Settlement | None = None
    # The handler completed the job in its own transaction (ctx.complete), which
    # committed: the worker writes nothing more for this run.
    committed: bool = False

    @classmethod
    def claimed(cls, task: Task[Any], row: Any, lease: float, renew: bool, now: float) -> Run:
        """The run of a row ``job_claim`` returned, started at ``now``. Arguments by
        position, in the fields' order: a call with fourteen keywords cost about three
        microseconds more per job on the drain (issue 38)."""
        return cls(
            task,
            row["id"],
            row["attempt"],
            row["failures"],
            row["carry"],
            row["priority"],
            row["created_us"],
            lease,
            renew,
            row["traceparent"],
            row["grp"],
            now,
            now,
        )

    def meta(self) -> JobMeta:
        """The job as its handler sees it (``ctx.job``), made when first read."""
        tier = _PRIORITY.get(self.priority)
        return JobMeta(
            self.id,
            self.task.kind,
            Priority(self.priority) if tier is None else tier,
            self.attempt,
            self.failures,
            _EPOCH + timedelta(microseconds=self.created_us),
            self.traceparent,
            self.group,
        )

    def ask_to_stop(self) -> None:
        """Set the handler's ``ctx.is_cancelled()`` and wake its ``ctx.cancelled()``."""
        self.cancelling = True
        if self._cancel is not None:
            self._cancel.set()

    def cancel_event(self) -> asyncio.Event:
        """The event ``ctx.cancelled()`` waits on, made on first use (set already if the
        worker asked the handler to stop before it)."""
        if self._cancel is None:
            self._cancel = asyncio.Event()
            if self.cancelling:
                self._cancel.set()
        return self._cancel

    def holds_claim(self) -> bool:
        """Might this run still hold its claim? Not once the heartbeat found it gone.
        (Its lease running out by this process's clock is not enough: until another
        worker recovers the job, the claim stands, and a run past its lease may still
        settle.)"""
        return not self.claim_lost

    def result(self) -> str | None:
        """The result to store with a completion (None unless the run completed)."""
        outcome = self.outcome
        return outcome.result if type(outcome) is Completed else None

    def log_extra(self) -> dict[str, Any]:
        """The structured fields of this job's log lines."""
        return {"job_id": self.id, "kind": self.task.kind, "attempt": self.attempt}
