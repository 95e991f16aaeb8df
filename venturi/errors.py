"""The exceptions venturi raises on purpose."""

from __future__ import annotations


class VenturiError(Exception):
    """Base class of every error venturi raises on purpose."""


class ConfigError(VenturiError, ValueError):
    """A knob was given a value it cannot take; the message names the knob."""


class SchemaError(VenturiError):
    """The database is unreachable or the venturi schema is not applied (or too old)."""


class ConnectError(VenturiError):
    """The database could not be reached; the message never contains the password."""


class DuplicateJob(VenturiError):
    """An enqueue with ``on_conflict="raise"`` found its key held: ``job_id`` is the
    holder (an unfinished job, or one finished within the task's ``unique_for``)."""

    def __init__(self, job_id: int, kind: str, key: str) -> None:
        super().__init__(f"key {key!r} of kind {kind!r} is held by job {job_id}")
        self.job_id = job_id
        self.kind = kind
        self.key = key


class ClaimLost(VenturiError):
    """``ctx.complete`` found the job no longer claimed by this run (its lease expired and
    it was recovered, or an operator acted on it): nothing was written, and the
    transaction it was called in must roll back."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id}: this run no longer holds its claim")
        self.job_id = job_id


class SignalTimeout(VenturiError, TimeoutError):
    """``ctx.wait_for_signal`` timed out before its signal came; raised on this run and
    on every later run of the job (the timeout is recorded)."""

    def __init__(self, job_id: int, name: str) -> None:
        super().__init__(f"job {job_id}: no signal {name!r} came before its timeout")
        self.job_id = job_id
        self.name = name


class ChildFailed(VenturiError):
    """``ctx.gather``: a child job ended dead or cancelled (or was deleted): ``job_id``,
    ``status`` and ``reason`` (its last error, a traceback in full). The message names the
    reason's last line only: a traceback in it ended the parent's own with the child's
    exception, which its failure line and the jobs list then reported as the parent's."""

    def __init__(self, job_id: int, status: str, reason: str | None) -> None:
        lines = [line.strip() for line in (reason or "").splitlines() if line.strip()]
        said = lines[-1] if lines else "no reason given"
        super().__init__(f"child job {job_id} ended {status}: {said}")
        self.job_id = job_id
        self.status = status
        self.reason = reason
