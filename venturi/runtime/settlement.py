"""How a job's execution ended, as the worker will write it: one frozen type per ending.

The executor turns a handler's ending into one of these; the completer writes it with
the statement its type names (one ``match``, in ``completer.py``). ``name`` is the key
of the worker's stats and the ``outcome`` label of the settled-jobs metric; for the
endings the journal records under their own event, that event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from venturi.status import JournalEvent


@dataclass(frozen=True, slots=True)
class Completed:
    """The handler completed; ``result`` is the stored result's JSON text, if any."""

    result: str | None = None
    name: ClassVar[str] = JournalEvent.COMPLETED


@dataclass(frozen=True, slots=True)
class Paused:
    """The handler paused: pending again with a new carry, visible at ``at`` or after
    ``after`` seconds (or now); not a failure."""

    carry: str
    at: datetime | None
    after: float | None
    name: ClassVar[str] = "pause"


@dataclass(frozen=True, slots=True)
class Retried:
    """The handler asked for a retry: a failure, with its own delay and carry if given."""

    carry: str | None
    after: float | None
    reason: str
    name: ClassVar[str] = "retry"


@dataclass(frozen=True, slots=True)
class Failed:
    """The handler raised, or returned something that is not an outcome. ``dead``, when
    set, is why it settles dead at once (an exception its task does not retry)."""

    error: str
    dead: str | None = None
    name: ClassVar[str] = JournalEvent.FAILED


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The handler ran past its task's timeout."""

    error: str
    name: ClassVar[str] = JournalEvent.TIMED_OUT


@dataclass(frozen=True, slots=True)
class Dead:
    """The handler declared the job dead: no more attempts."""

    reason: str
    name: ClassVar[str] = JournalEvent.DEAD


@dataclass(frozen=True, slots=True)
class Undecodable:
    """The stored carry no longer decodes as the task's type: dead, since a carry that
    does not decode now will not decode later."""

    reason: str
    name: ClassVar[str] = "undecodable"


@dataclass(frozen=True, slots=True)
class Released:
    """The worker stopped the handler (shutdown): pending again, not a failure."""

    detail: str
    name: ClassVar[str] = "release"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """An operator cancelled the job and the handler ended short of completing."""

    detail: str
    name: ClassVar[str] = JournalEvent.CANCELLED


@dataclass(frozen=True, slots=True)
class Waiting:
    """A workflow run must wait (a timer, a signal, children): the job gives up its claim
    and waits, unless an event came since ``seen`` (the job's wake_seq its decision
    read); ``detail`` says what it waits for, for the journal."""

    detail: str
    seen: int
    wake_at: datetime | None = None
    signal: str | None = None
    wait_for: tuple[int, ...] | None = None
    name: ClassVar[str] = "waiting"


@dataclass(frozen=True, slots=True)
class Committed:
    """The handler completed the job in its own transaction (``ctx.complete``), and it
    committed: already written, nothing left to settle."""

    name: ClassVar[str] = JournalEvent.COMPLETED


Settlement = (
    Completed
    | Paused
    | Retried
    | Failed
    | TimedOut
    | Dead
    | Undecodable
    | Released
    | Cancelled
    | Committed
    | Waiting
)

# A completion without a result, shared: the common ending costs no allocation.
COMPLETED = Completed()
COMMITTED = Committed()
