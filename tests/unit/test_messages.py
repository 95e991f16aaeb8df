"""A bad value in an error message: bounded, on one line, and a ``ConfigError`` whatever
the value (an integer of thousands of digits raised ``ValueError`` from its own repr; a
100,000-character name was echoed whole; an object whose repr spans lines broke the
message's one line)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import venturi
from venturi import ConfigError, sql
from venturi.admin.common import parse_duration
from venturi.cronspec import CronSpec
from venturi.groups import check_cap
from venturi.workflow.signals import checked_signal


class Lines:
    def __repr__(self) -> str:
        return "Lines(\n  1,\n  2)"


CHECKS: dict[str, Callable[[Any], object]] = {
    "signal name": lambda v: checked_signal(1, v, None),
    "schema": sql.validate_schema,
    "workflow node": lambda v: venturi.Workflow().add(v, None),  # type: ignore[arg-type]
    "cron": CronSpec,
    "duration": lambda v: parse_duration(v if isinstance(v, str) else f"{v}s"),
    "group cap": check_cap,
}


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.parametrize(
    "value", [10**5000, "\x01" + "x" * 100_000, Lines()], ids=["int", "str", "lines"]
)
def test_a_bad_value_reads_in_one_bounded_line(check: Callable[[Any], object], value: Any) -> None:
    if isinstance(value, int) and check is CHECKS["duration"]:
        value = "9" * 5000 + "s"  # what a user types
    with pytest.raises(ConfigError) as raised:
        check(value)
    said = str(raised.value)
    assert "\n" not in said and len(said) < 400, said[:500]


class Controls:
    def __repr__(self) -> str:
        return "Controls(\x1b[2J\u2028\x0b)"


def test_the_rest_of_the_bad_values_read_in_one_bounded_line() -> None:
    # A time zone too long for a file name raised OSError of 100,095 characters; a long
    # signal name with a payload msgspec cannot store, a TypeError as long; a repr
    # holding ESC, U+2028 or VT reached the message raw.
    for tz in ("x" * 100_000, "a" * 256):
        with pytest.raises(ConfigError) as raised:
            CronSpec("* * * * *", tz)
        assert len(str(raised.value)) < 400, str(raised.value)[:500]
    with pytest.raises(TypeError) as typed:
        checked_signal(1, "x" * 100_000, object())
    assert len(str(typed.value)) < 400, str(typed.value)[:500]
    with pytest.raises(ConfigError) as raised:
        check_cap(Controls())
    said = str(raised.value)
    assert len(said.splitlines()) == 1 and "\x1b" not in said and "\x0b" not in said, said
