"""Groups (SPEC 13): a job's group checked where it is given, and a group's settings
changed while workers run (``set_group``, ``set_group_sync``). docs/groups.md holds the
model: exact per-group caps, per-group rates and weighted fair share, in the claim."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from venturi import db, validate
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA

MAX_GROUP_LENGTH = 200


class _Unchanged:
    """The default of ``set_group``'s fields: leave the setting as it is."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()


class GroupSettings(msgspec.Struct, frozen=True):
    """A group's settings as ``set_group`` left them (None: the task's default)."""

    kind: str
    group: str
    cap: int | None
    weight: float | None
    paused: bool


def check_group(value: object, knob: str = "group", *, new: bool = True) -> str:
    """``value`` if it is a group: a non-empty string of at most 200 characters without
    control characters or line separators; else ``ConfigError``. Look-alikes (spaces at an
    end, invisible characters) are groups: the operator's reads print them quoted
    (``venturi.formatting.shown_name``). ``new`` False (an operator naming a group that
    may exist: set, show, filter): the line separators are let through, since releases
    before December 2026 took them, and a group paused under such a name could not be
    resumed."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_GROUP_LENGTH
        or any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in value)
        # The line and paragraph separators (categories Zl and Zp, one character each)
        # break a line as a newline does: every one-line output naming the group broke.
        or (new and ("\u2028" in value or "\u2029" in value))
    ):
        raise ConfigError(
            f"{knob} must be a non-empty string of at most {MAX_GROUP_LENGTH} characters "
            "without control characters or line separators (U+2028, U+2029), "
            f"got {validate.shown(value)}"
        )
    if not validate.encodable(value):
        raise ConfigError(
            f"{knob} must be valid Unicode text (no lone surrogate), got {validate.shown(value)}"
        )
    return value


# A claim advances a group's virtual time by 1/weight per job, up to a claim's 100 jobs of
# one group: at 5e-324 that overflowed float8, and every grouped claim of the kind failed
# ("value out of range: overflow"), every group's jobs stalled by one group's setting.
# A million to one either way is far past any share an operator means. Virtual time is
# numeric (migration 26): in float8 a step of 1e-6 was rounded away once a kind's time
# passed about 1.8e10, which the least weight reaches alone in 18,000 claims.
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1e6


def check_cap(
    value: object, *, reset: str = "None", typed: str | None = None
) -> tuple[bool, int | None]:
    """(whether ``set_group`` changes the cap, the cap); ``reset`` names the value that
    returns it to the task's default (``default`` on the command line), ``typed`` is the
    text the value was read from, echoed in the message in its place."""
    if value is UNCHANGED:
        return False, None
    if value is None:
        return True, None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        # The wording of every integer knob (validate.integer), @task(group_cap=) too.
        got = validate.shown(value) if typed is None else validate.clipped(typed)
        raise ConfigError(f"cap must be an integer >= 1 (or {reset}), got {got}")
    return True, validate.at_most_int_max(value, "cap")


def check_weight(
    value: object, *, reset: str = "None", typed: str | None = None
) -> tuple[bool, float | None]:
    """As ``check_cap``, for the weight."""
    if value is UNCHANGED:
        return False, None
    if value is None:
        return True, None
    got = validate.shown(value) if typed is None else validate.clipped(typed)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        # (an int is finite, and may be too large for math.isfinite: the range says so)
        or (isinstance(value, float) and not math.isfinite(value))
        or value <= 0
    ):
        raise ConfigError(f"weight must be a finite number above 0 (or {reset}), got {got}")
    if not MIN_WEIGHT <= value <= MAX_WEIGHT:
        raise ConfigError(
            f"weight must be from {MIN_WEIGHT:g} to {MAX_WEIGHT:,.0f} (or {reset}), got {got}"
        )
    return True, float(value)


def _paused(value: object) -> tuple[bool, bool | None]:
    if value is UNCHANGED:
        return False, None
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"paused must be True, False or None, got {validate.shown(value)}")
    return True, value


def _fields(
    kind: object, group: object, cap: object, weight: object, paused: object
) -> dict[str, Any]:
    fields = {
        "kind": validate.kind(kind),
        "group": check_group(group, new=False),
        "cap": check_cap(cap),
        "weight": check_weight(weight),
        "paused": _paused(paused),
    }
    # As `venturi groups set` without an option: a call that sets nothing wrote a row of
    # defaults for a group never seen (a forgotten keyword, most often).
    if not any(fields[f][0] for f in ("cap", "weight", "paused")):
        raise ConfigError("set_group: nothing to set: pass cap=, weight= or paused=")
    return fields


def _settings(row: Any) -> GroupSettings:
    return GroupSettings(row["kind"], row["grp"], row["cap"], row["weight"], row["paused"])


async def set_group(
    conn: Any,
    kind: str,
    group: str,
    *,
    cap: int | None = UNCHANGED,
    weight: float | None = UNCHANGED,
    paused: bool | None = UNCHANGED,
    schema: str = DEFAULT_SCHEMA,
) -> GroupSettings:
    """Change group ``group`` of ``kind`` while workers run, on any connection
    ``Task.enqueue`` takes, in the caller's transaction: ``cap`` (at most this many of its
    jobs claimed at once), ``weight`` (its share among the groups with work), ``paused``
    (its jobs stay pending). A field left out keeps its value; ``None`` returns it to the
    task's default (``group_cap``, weight 1, not paused); at least one must be given.
    Every value is checked first (``ConfigError``, nothing written). Lowering a cap lets
    running jobs finish."""
    fields = _fields(kind, group, cap, weight, paused)
    return _settings(await db.groups.group_set(conn, schema=schema, **fields))


def set_group_sync(
    conn: Any,
    kind: str,
    group: str,
    *,
    cap: int | None = UNCHANGED,
    weight: float | None = UNCHANGED,
    paused: bool | None = UNCHANGED,
    schema: str = DEFAULT_SCHEMA,
) -> GroupSettings:
    """``set_group`` on any connection ``Task.enqueue_sync`` takes."""
    fields = _fields(kind, group, cap, weight, paused)
    return _settings(db.groups.group_set_sync(conn, schema=schema, **fields))
