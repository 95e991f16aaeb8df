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


def _one_line(reason: str | None) -> str:
    """A child's last error on one line: of a traceback, its exception (its type and its
    whole message, of however many lines: the first unindented line after the last
    frame on), else the reason itself."""
    lines = (reason or "").splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    if frames:
        after = range(frames[-1] + 1, len(lines))
        start = next((i for i in after if lines[i][:1] not in ("", " ")), frames[-1] + 1)
        lines = lines[start:]
    said = " ".join(line.strip() for line in lines if line.strip())
    return said or "no reason given"


class ChildFailed(VenturiError):
    """``ctx.gather``: a child job ended dead or cancelled (or was deleted): ``job_id``,
    ``status`` and ``reason`` (its last error, a traceback in full). The message names the
    child's exception on one line: a traceback in it ended the parent's own with the
    child's exception, which its failure line and the jobs list reported as the parent's."""

    def __init__(self, job_id: int, status: str, reason: str | None) -> None:
        super().__init__(f"child job {job_id} ended {status}: {_one_line(reason)}")
        self.job_id = job_id
        self.status = status
        self.reason = reason
