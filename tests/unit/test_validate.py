"""Validation messages echo the bad value bounded: a huge value neither floods the message
nor, for an integer past Python's 4,300-digit limit of int-to-str conversion, replaces the
ConfigError with a ValueError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import venturi
from venturi import ConfigError, Rate, validate
from venturi.groups import check_cap, check_group, check_weight

HUGE = 10**5000


async def handler(ctx: Any, carry: Any) -> None:
    return None


@pytest.mark.parametrize(
    "check",
    [
        lambda: check_weight(HUGE),
        lambda: check_weight(-HUGE),
        lambda: check_cap(HUGE),
        lambda: check_cap(-HUGE),
        lambda: venturi.task(kind="v_huge_cap", group_cap=HUGE)(handler),
        lambda: venturi.task(kind="v_huge_concurrency", cap=HUGE)(handler),
        lambda: Rate(per_second=HUGE),
        lambda: Rate(per_second=1, burst=HUGE),
        lambda: validate.integer(HUGE, "n"),
        lambda: validate.seconds(HUGE, "lease"),
        lambda: validate.port(HUGE, "port"),
    ],
)
def test_a_huge_integer_is_a_short_config_error(check: Callable[[], object]) -> None:
    with pytest.raises(ConfigError) as caught:
        check()
    message = str(caught.value)
    assert "5,001 digits" in message and len(message) < 200, message


def test_a_long_value_is_clipped_in_its_message() -> None:
    with pytest.raises(ConfigError) as caught:
        check_group("x" * 100_000)
    message = str(caught.value)
    assert len(message) < 250 and "100,000 characters" in message, message
    with pytest.raises(ConfigError) as caught:
        check_weight(10**400)
    assert "401 digits" in str(caught.value) and "0" * 100 not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        validate.kind(" " + "k" * 199)
    assert len(str(caught.value)) < 200, str(caught.value)


def test_a_short_value_is_echoed_as_its_repr() -> None:
    for value, needle in ((0, "got 0"), (-2, "got -2"), ("", "got ''"), (10**59, f"got {10**59}")):
        with pytest.raises(ConfigError, match=needle):
            validate.integer(value, "n", minimum=10**60)
