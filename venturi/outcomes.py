"""What a handler returns: the four outcomes of the task model."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import msgspec

from venturi import validate
from venturi.errors import ConfigError
from venturi.validate import seconds


class Complete(msgspec.Struct, frozen=True):
    """The job is done; ``result`` (msgspec-encodable) is stored with it."""

    result: Any = None


class Pause(msgspec.Struct, frozen=True):
    """Checkpoint ``carry`` and go back to pending, visible again at ``at`` (or now + after)."""

    carry: Any
    after: float | None = None
    at: datetime | None = None


class Retry(msgspec.Struct, frozen=True):
    """A failed execution the handler chose; counts toward the backstop."""

    carry: Any = None
    has_carry: bool = False
    after: float | None = None
    reason: str = ""


class Dead(msgspec.Struct, frozen=True):
    """Settle straight to dead."""

    reason: str


Outcome = Complete | Pause | Retry | Dead


def complete(result: Any = None) -> Complete:
    """The job is done; an optional msgspec-encodable ``result`` is stored."""
    return Complete(result)


def pause(carry: Any, after: timedelta | float | None = None, at: datetime | None = None) -> Pause:
    """Checkpoint ``carry`` and return to pending, visible again after ``after`` or at ``at``."""
    if after is not None and at is not None:
        raise ConfigError("pause takes after or at, not both")
    if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
        raise ConfigError(f"pause at must be a timezone-aware datetime, got {validate.shown(at)}")
    secs = None if after is None else seconds(after, "pause after", allow_zero=True)
    return Pause(carry, secs, at)


def retry(carry: Any = None, after: timedelta | float | None = None, reason: str = "") -> Retry:
    """A failed execution: retried after the backoff (or ``after``); ``carry`` replaces the
    pre-run carry when given. None is no carry (SPEC 2's signature): the pre-run carry
    stays, whatever the carry's type (``retry(carry=None)`` as written from the SPEC was
    taken as a new carry, refused, and settled as a plain failure without its ``after``)."""
    secs = None if after is None else seconds(after, "retry after", allow_zero=True)
    if carry is None:
        return Retry(None, False, secs, str(reason))
    return Retry(carry, True, secs, str(reason))


def dead(reason: str) -> Dead:
    """Settle the job straight to dead with ``reason``."""
    return Dead(str(reason))
