"""The exceptions venturi raises on purpose, and how a failed run's exception reads on one
line (its log line, the jobs lists, ``ChildFailed``)."""

from __future__ import annotations

import itertools
import re


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


_RAISED = re.compile(r"([A-Za-z_][\w.<>]*)(?::\s?(.*))?", re.S)
# The lines Python prints between the exceptions of a chain: the run's exception is the
# one after the last of them (the one raised last), not the cause or context before it.
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
_TRACEBACK = "Traceback (most recent call last):"
_GROUP_TRACEBACK = "  + Exception Group Traceback (most recent call last):"


def exception_of(text: str | None) -> tuple[str, str] | None:
    """The exception a traceback ends with, as its type and its whole message on one line
    (a message of many lines, pydantic's or asyncpg's, joined), or None if ``text`` is no
    traceback. Of a chain, the exception raised last; its message is everything from the
    first line after its traceback's header that is not indented (frames are): its last
    line alone would be a fragment of it, without the type."""
    lines = (text or "").splitlines()
    # A separator is one only where a traceback's header follows it: a message may quote
    # the line (a pasted log, a subprocess's stderr), and its text is no new exception.
    heads = (_TRACEBACK, _GROUP_TRACEBACK)
    last = max(
        (
            i
            for i, line in enumerate(lines)
            if line in _CHAINED and next((x for x in lines[i + 1 :] if x.strip()), "") in heads
        ),
        default=-1,
    )
    lines = lines[last + 1 :]
    while lines and not lines[0].strip():
        del lines[0]
    if lines and lines[0] == _GROUP_TRACEBACK:
        # An exception group draws its own part with "  | ", each member's below it.
        own = itertools.takewhile(lambda x: x.startswith("  | "), lines[1:])
        lines = [_TRACEBACK, *(line[4:] for line in own)]
    if not lines or lines[0] != _TRACEBACK:
        return None
    start = next((i for i in range(1, len(lines)) if lines[i][:1] not in ("", " ")), None)
    if start is None:
        return None
    said = " ".join(line.strip() for line in lines[start:] if line.strip())
    m = _RAISED.fullmatch(said)
    if m is None:
        return "Error", said
    return m.group(1), (m.group(2) or "").strip()


def exception_line(text: str | None) -> str:
    """A failed run's error on one line: of a traceback, ``Type: its whole message``
    (``exception_of``), else the text itself with its lines joined."""
    raised = exception_of(text)
    if raised is None:
        return " ".join(line.strip() for line in (text or "").splitlines() if line.strip())
    kind, message = raised
    return f"{kind}: {message}" if message else kind


class ChildFailed(VenturiError):
    """``ctx.gather``: a child job ended dead or cancelled (or was deleted): ``job_id``,
    ``status`` and ``reason`` (its last error, a traceback in full). The message names the
    child's exception on one line: a traceback in it ended the parent's own with the
    child's exception, which its failure line and the jobs list reported as the parent's."""

    def __init__(self, job_id: int, status: str, reason: str | None) -> None:
        super().__init__(
            f"child job {job_id} ended {status}: {exception_line(reason) or 'no reason given'}"
        )
        self.job_id = job_id
        self.status = status
        self.reason = reason
