"""How a workflow run ends early: it must wait, or a recorded value no longer decodes.

Both are ``BaseException`` subclasses, not ``Exception``: a handler's ``except
Exception`` (around a step, say) must not swallow them, or the run would go on as if the
wait had returned. The executor turns them into the ``waiting`` and ``undecodable``
settlements.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


class Suspend(BaseException):
    """The run must wait: ``seen`` is the job's wake_seq its decision read; it waits for
    the timer ``wake_at``, the signal ``signal`` and/or the jobs ``wait_for``.
    ``detail`` says what, for the journal."""

    def __init__(
        self,
        detail: str,
        seen: int,
        *,
        wake_at: datetime | None = None,
        signal: str | None = None,
        wait_for: Sequence[int] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.seen = seen
        self.wake_at = wake_at
        self.signal = signal
        self.wait_for = None if wait_for is None else list(wait_for)


class Unreplayable(BaseException):
    """A recorded value (a step's, a signal's payload, a child's result) no longer
    decodes as today's type: the job settles dead with ``reason``, never a wrong value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
