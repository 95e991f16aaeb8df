"""Cron expressions: parsed and checked once, evaluated in a time zone.

Parsing and slot arithmetic are croniter's (a maintained, widely used implementation);
this module checks an expression when a task or schedule is declared, so a bad one
fails there, and answers the two questions the scheduler asks.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Any

from venturi import validate
from venturi.errors import ConfigError

_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# croniter's "R" (random) and "H" (hashed) fields would give every worker its own slots.
_NONDETERMINISTIC = re.compile(r"^(R|H)($|[/(])", re.IGNORECASE)
# Zone names that stand for the host's own setting (its /etc/localtime, the zone a
# POSIX TZ string borrows its rules from) or for none ("Factory"): two workers on
# different hosts would read one schedule in different zones.
_HOST_ZONES = frozenset({"localtime", "posixrules", "factory"})
_TINY = timedelta(microseconds=1)


class CronSpec:
    """A cron expression and the time zone its fields are read in.

    Five fields (minute hour day-of-month month day-of-week), or six with a trailing
    seconds field, or one of the ``@daily``-style aliases. Slots are instants. When
    clocks go forward, a slot in the skipped hour runs once, at the jump (croniter's
    rule); when they go back, a slot at a fixed hour runs at the first of the two
    occurrences of its local time only, as cron does, while an expression whose hour is
    a wildcard or a step (``*/30 * * * *``) runs through both.
    """

    __slots__ = ("expression", "fixed_hour", "tz", "zone")

    def __init__(self, expression: object, tz: object = None) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise ConfigError(
                f"cron must be a cron expression string, got {validate.shown(expression)}"
            )
        text = " ".join(expression.split())
        fields = text.split(" ")
        if text.startswith("@"):
            if text.lower() not in _ALIASES:
                raise ConfigError(
                    f"cron: unknown alias {validate.shown(text)} (one of {', '.join(_ALIASES)})"
                )
        elif len(fields) not in (5, 6):
            raise ConfigError(
                f"cron must have 5 fields (minute hour day month weekday), or 6 with "
                f"seconds last, got {len(fields)} in {validate.shown(expression)}"
            )
        if any(_NONDETERMINISTIC.match(f) for f in fields):
            raise ConfigError(
                f"cron: random (R) and hashed (H) fields are not supported, got {validate.shown(expression)}"
            )
        if tz is None:
            tz = "UTC"
        if not isinstance(tz, str) or not tz:
            raise ConfigError(f"tz must be an IANA time zone name, got {validate.shown(tz)}")
        if tz.rsplit("/", 1)[-1].lower() in _HOST_ZONES:
            raise ConfigError(
                f"tz: {validate.shown(tz)} means each host's own zone (or none): "
                "name an IANA zone such as Europe/Paris, or UTC"
            )
        try:
            zone = zoneinfo.ZoneInfo(tz)
        # OSError: a name too long for a file name (zoneinfo looks for a file of it).
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            raise ConfigError(f"tz: unknown time zone {validate.shown(tz)}") from None
        self.expression = text
        self.tz = tz
        self.zone = zone
        if text.startswith("@"):
            self.fixed_hour = text.lower() != "@hourly"
        else:
            self.fixed_hour = "*" not in fields[1] and "/" not in fields[1]
        croniter = _croniter()
        if not croniter.is_valid(text):
            raise ConfigError(f"cron: invalid expression {validate.shown(expression)}")
        try:
            self.next_after(datetime(2000, 1, 1, tzinfo=UTC))
        except Exception as exc:  # croniter's CroniterBadDateError: e.g. "0 0 31 2 *"
            raise ConfigError(f"cron: {validate.shown(expression)} never matches: {exc}") from None

    def __repr__(self) -> str:
        return f"CronSpec({self.expression!r}, tz={self.tz!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CronSpec) and (self.expression, self.tz) == (
            other.expression,
            other.tz,
        )

    def __hash__(self) -> int:
        return hash((self.expression, self.tz))

    def latest(self, now: datetime) -> datetime:
        """The latest slot at or before ``now`` (an aware datetime), in UTC."""
        start = (now.astimezone(UTC) + _TINY).astimezone(self.zone)
        while True:
            slot: datetime = _croniter()(self.expression, start).get_prev(datetime)
            if not self._repeated(slot):
                return slot.astimezone(UTC)
            start = slot

    def next_after(self, now: datetime) -> datetime:
        """The first slot strictly after ``now`` (an aware datetime), in UTC."""
        start = now.astimezone(self.zone)
        while True:
            slot: datetime = _croniter()(self.expression, start).get_next(datetime)
            if not self._repeated(slot):
                return slot.astimezone(UTC)
            start = slot

    def _repeated(self, slot: datetime) -> bool:
        """True for the second occurrence of a local time when clocks went back, if the
        expression names fixed hours (that slot already ran an hour before)."""
        if not self.fixed_hour:
            return False
        local = slot.astimezone(self.zone)
        return local.fold == 1 and local.replace(fold=0).astimezone(UTC) != slot.astimezone(UTC)


def _croniter() -> Any:
    # Imported on first use: `import venturi` stays light for code that declares no cron.
    from croniter import croniter

    return croniter
