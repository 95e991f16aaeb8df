"""What every operator call shares: who is acting, the journal details of operator
actions, the result of an action on one job (``Change``), and the checks of its
arguments (statuses, job ids, durations, priorities)."""

from __future__ import annotations

import getpass
import re
import socket
from collections.abc import Iterable, Sequence

import msgspec

from venturi import validate
from venturi.errors import ConfigError
from venturi.priority import Priority
from venturi.status import DEFAULT_LIVENESS, FINISHED, MANUAL_RETRY, STATUSES, JobStatus

# What venturi.admin exports from here.
__all__ = [
    "CANCEL_DETAIL",
    "DEFAULT_LIVENESS",
    "FINISHED",
    "MANUAL_RETRY",
    "RUN_NOW_DETAIL",
    "SET_PRIORITY_DETAIL",
    "STATUSES",
    "Change",
    "JobStatus",
    "check_ids",
    "check_status",
    "operator_identity",
    "parse_duration",
    "parse_priority",
]

# The journal details of operators' actions (an operator's retry's, ``MANUAL_RETRY``, is in
# ``venturi.status``: the alerts read it too).
CANCEL_DETAIL = "cancelled by an operator"
RUN_NOW_DETAIL = "run now"
SET_PRIORITY_DETAIL = "priority set to"


def operator_identity() -> str:
    """Who is acting, for the journal's worker column: ``operator:user@host``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "?"
    return f"operator:{user}@{socket.gethostname()}"


def check_status(value: str | None, allowed: Sequence[str] = STATUSES) -> str | None:
    """``value`` if it is one of ``allowed`` (None passes: no filter), else ConfigError."""
    return None if value is None else validate.one_of(value, allowed, "status")


def check_ids(ids: Iterable[int]) -> list[int]:
    """The job ids as a list: at least one, each a positive integer, else ConfigError."""
    out = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 1:
            raise ConfigError(f"job ids must be positive integers, got {validate.shown(i)}")
        if i > validate.BIGINT_MAX:  # else the driver's error, "out of int64 range"
            raise ConfigError(
                f"job ids must be at most {validate.BIGINT_MAX:,}, got {validate.shown(i)}"
            )
        out.append(i)
    if not out:
        raise ConfigError("give at least one job id")
    return out


def check_kinds(kinds: Iterable[str]) -> list[str]:
    """The kinds as a list: at least one, each what a task's kind can be
    (`validate.kind`), else ConfigError. `venturi kinds pause ''` paused a kind no job
    can have."""
    out = [validate.kind(k) for k in ([kinds] if isinstance(kinds, str) else kinds)]
    if not out:
        raise ConfigError("give at least one kind")
    return out


# Each unit at most once, largest first; lower-case only and ASCII digits only. Folding
# case made "6M" (six months, to many) six minutes, and `purge --older-than 6M` deleted the
# history it was meant to keep; \d took any Unicode digit (Arabic-Indic "12h" was 12 h); a repeated unit
# ("1h1h") added up.
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_DURATION = re.compile("".join(f"(?:({_NUMBER}){u})?" for u in "wdhms"))
_UNIT = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> float:
    """Seconds from ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or combinations, largest
    unit first and each once (``1h30m``). Lower-case units only: ``M`` is no month."""
    m = _DURATION.fullmatch(text) if isinstance(text, str) and text else None
    if m is None or not any(m.groups()):
        raise ConfigError(
            "a duration is numbers with units s, m, h, d or w, each once, largest first "
            f"(7d, 12h, 1h30m; lower-case: 'M' is not months), got {validate.shown(text)}"
        )
    total = sum(float(n) * _UNIT[u] for n, u in zip(m.groups(), "wdhms", strict=True) if n)
    # At most 100 years, as every duration: `purge --older-than 99999999w` failed in the
    # database, "timestamp out of range".
    return validate.seconds(total, f"duration {validate.shown(text)}", allow_zero=True)


def parse_priority(value: Priority | str) -> Priority:
    """A ``Priority`` from itself or its name (high, normal, low; any case)."""
    if isinstance(value, Priority):
        return value
    if isinstance(value, str) and value.strip().upper() in Priority.__members__:
        return Priority[value.strip().upper()]
    raise ConfigError(f"priority must be one of high, normal, low, got {validate.shown(value)}")


class Change(msgspec.Struct, frozen=True):
    """What an operator's retry or cancel did to one job; ``done`` False is a refusal."""

    id: int
    done: bool
    message: str
    kind: str | None = None
    was: str | None = None
    now: str | None = None


def missing(job_id: int) -> Change:
    """The refusal of an action on a job id that names no job."""
    return Change(job_id, False, f"job {job_id} does not exist")
