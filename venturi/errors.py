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
