"""Checks for configuration knobs: each raises ``ConfigError`` naming the knob and what
it got, so a bad setting fails when it is set, never later in the loop."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

import msgspec

from venturi.errors import ConfigError
from venturi.formatting import terminal_safe

T = TypeVar("T")


# The most of a bad value a message echoes. A whole repr made a 100,000-character group's
# ConfigError 100,093 characters long, and repr() of an integer past Python's limit of
# 4,300 digits raises ValueError, which replaced the ConfigError (set_group(cap=10**5000)).
SHOWN_MAX = 60


def shown(value: object) -> str:
    """``repr(value)`` for a message, at most about ``SHOWN_MAX`` characters: a longer one
    is cut with "…" (and a string's length said), an integer of more digits is described
    by their count."""
    # Past 60 digits (2**196 > 10**59) an integer is described, never converted to text.
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 196:
        sign = "a negative" if value < 0 else "an"
        return f"{sign} integer of {_digits(abs(value)):,} digits"
    try:
        # A message is one line, with nothing that acts on a terminal: an object's own
        # repr may hold a newline, ESC or U+2028 (a str's escapes them).
        text = terminal_safe(repr(value), keep="")
    except Exception:  # a value's own __repr__ may fail: the message must not
        return f"a {type(value).__name__}"
    if len(text) <= SHOWN_MAX:
        return text
    if isinstance(value, str):
        return f"{text[: SHOWN_MAX - 1]}… ({len(value):,} characters)"
    return f"{text[: SHOWN_MAX - 1]}…"


def clipped(text: str) -> str:
    """``text`` as it is for a message (what a user typed), cut as ``shown`` cuts."""
    if len(text) <= SHOWN_MAX:
        return text
    return f"{text[: SHOWN_MAX - 1]}… ({len(text):,} characters)"


def _digits(n: int) -> int:
    """The decimal digits of ``n`` > 0, without converting it to text (refused past
    4,300 digits, and quadratic): the logarithm, corrected where the float is off."""
    digits = int(math.log10(n)) + 1
    if 10 ** (digits - 1) > n:
        return digits - 1
    return digits + 1 if 10**digits <= n else digits


# The largest value of PostgreSQL's integer: every integer knob is stored or bound as one,
# and a larger one passed every check, to fail in the database later (a worker's claim,
# retried for good; an enqueue with a driver's error).
INT_MAX = 2_147_483_647


# Job ids are PostgreSQL bigints: a larger one names no job.
BIGINT_MAX = 9_223_372_036_854_775_807


def integer(value: Any, knob: str, *, minimum: int = 1, hint: str = "") -> int:
    """An int (not a bool) of at least ``minimum`` and at most ``INT_MAX``; ``hint``
    follows the bound."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{knob} must be an integer >= {minimum}{hint}, got {shown(value)}")
    return at_most_int_max(value, knob)


def at_most_int_max(value: int, knob: str) -> int:
    if value > INT_MAX:
        raise ConfigError(f"{knob} must be at most {INT_MAX:,}, got {shown(value)}")
    return value


def boolean(value: Any, knob: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{knob} must be a bool, got {shown(value)}")
    return value


def instance(value: Any, cls: type[T], knob: str, what: str) -> T:
    """``value`` if it is a ``cls``; ``what`` names the type for the message."""
    if not isinstance(value, cls):
        raise ConfigError(f"{knob} must be {what}, got {shown(value)}")
    return value


def non_empty_str(value: Any, knob: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{knob} must be a non-empty string, got {shown(value)}")
    return value


MAX_KIND_LENGTH = 200


def encodable(value: str) -> bool:
    """Whether ``value`` is text the database can store: a Python string may hold a lone
    surrogate ("\\ud800", from a broken decode), which has no UTF-8 form, and the
    driver refused it with an error of its own."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable(value: object) -> bool:
    """Whether ``value`` is a string PostgreSQL's text can hold: no NUL (text cannot hold
    one) and no lone surrogate (``encodable``); the driver refused either with its own
    error."""
    return isinstance(value, str) and "\x00" not in value and encodable(value)


def kind(value: Any, knob: str = "kind") -> str:
    """A kind as a task can have it: every place that writes one (a task's declaration, a
    pause, a group's settings) checks it here, so that none stores a kind no job can
    have."""
    if not isinstance(value, str) or not value or len(value) > MAX_KIND_LENGTH:
        raise ConfigError(
            f"{knob} must be a non-empty string of at most {MAX_KIND_LENGTH} characters, "
            f"got {shown(value)}"
        )
    if value != value.strip():
        raise ConfigError(f"{knob} must not begin or end with whitespace, got {shown(value)}")
    if "," in value:
        # The notify payload lists kinds comma-separated.
        raise ConfigError(f"{knob} must not contain a comma, got {shown(value)}")
    if "\x00" in value:
        # PostgreSQL's text cannot hold one: every enqueue and claim of the kind failed.
        raise ConfigError(f"{knob} must not hold a NUL character, got {shown(value)}")
    if not encodable(value):
        raise ConfigError(
            f"{knob} must be valid Unicode text (no lone surrogate), got {shown(value)}"
        )
    return value


def port(value: Any, knob: str) -> int:
    """A TCP port number, 1 to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ConfigError(f"{knob} must be a TCP port (1-65535), got {shown(value)}")
    return value


def one_of(value: Any, allowed: Sequence[str], knob: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{knob} must be one of {', '.join(allowed)}, got {shown(value)}")
    return str(value)


def pool_or_dsn(value: Any, knob: str) -> tuple[str | None, Any]:
    """(dsn, None) for a non-empty DSN, (None, pool) for something with a pool's
    acquire, release and fetch."""
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(f"{knob} must be an asyncpg Pool or a non-empty DSN")
        return value, None
    if all(hasattr(value, m) for m in ("acquire", "release", "fetch")):
        return None, value
    raise ConfigError(f"{knob} must be an asyncpg Pool or a DSN, got {shown(value)}")


# The longest duration a knob takes: 100 years. Durations become timestamps in the
# database (a lease's expiry, a visible time, a key's end) whose range ends in 294276 AD:
# a lease of 1e14 s passed every check, and then every claim of its kind failed, "timestamp
# out of range", retried for good; an enqueue `after=1e15` failed with the driver's error.
MAX_SECONDS = 36_525 * 86_400


def seconds(value: timedelta | float | int, knob: str, *, allow_zero: bool = False) -> float:
    """A duration knob in seconds (a timedelta or a number), finite and positive (or
    non-negative with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, timedelta | float | int):
        raise ConfigError(f"{knob} must be a timedelta or a number of seconds, got {shown(value)}")
    if isinstance(value, timedelta):
        secs = value.total_seconds()
    elif isinstance(value, int):
        # Clamped to just past its bounds first: float() of an int too large for a float
        # (either sign) is an OverflowError; the checks below refuse it as they would.
        secs = float(max(-1, min(value, MAX_SECONDS + 1)))
    else:
        secs = value
    if math.isnan(secs) or math.isinf(secs):
        raise ConfigError(f"{knob} must be finite, got {shown(value)}")
    if secs < 0 or (secs == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ConfigError(f"{knob} must be {bound}, got {shown(value)}")
    if secs > MAX_SECONDS:
        raise ConfigError(
            f"{knob} must be at most 100 years ({MAX_SECONDS:,} s), got {shown(value)}"
        )
    return secs


def exception_types(value: Any, knob: str) -> tuple[type[BaseException], ...]:
    """An exception class or a non-empty tuple of them, as ``except`` takes them."""
    types = value if isinstance(value, tuple) else (value,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise ConfigError(
            f"{knob} must be an exception class or a non-empty tuple of them, got {shown(value)}"
        )
    return types


def decodable(value: object, knob: str) -> object:
    """``value`` if msgspec can decode JSON as that type, else ``ConfigError``."""
    try:
        msgspec.json.Decoder(value)
    except TypeError as exc:
        raise ConfigError(
            f"{knob} must be a type msgspec can decode, got {shown(value)}: {exc}"
        ) from None
    return value
