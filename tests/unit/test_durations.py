"""Durations as an operator writes them (`venturi purge --older-than`): the documented
units only, lower-case, ASCII digits, each unit once, largest first."""

from __future__ import annotations

import pytest

from venturi import admin
from venturi.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400),
        ("2w3d", 2 * 604800 + 3 * 86400),
        ("1w1d1h1m1s", 604800 + 86400 + 3600 + 60 + 1),
        ("1.5h", 5400),
        ("0s", 0),
    ],
)
def test_a_duration_in_the_documented_form(text: str, seconds: float) -> None:
    assert admin.parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad",
    [
        "6M",  # six months to many, six minutes to the old parser: a purge of history
        "1M",
        "2W",
        "1D",
        "12H",
        "\u0661\u0662h",  # Arabic-Indic digits, read as 12
        "\uff11h",  # a full-width digit
        "1h1h",  # 2 h: a unit twice
        "30m1h",  # out of order
        "1s1m",
        " 7d ",
        "7d\n",
        "\t7d",
        ".5h",
        "5.h",
    ],
)
def test_anything_else_is_refused_naming_the_forms(bad: str) -> None:
    with pytest.raises(ConfigError, match="a duration is") as err:
        admin.parse_duration(bad)
    said = str(err.value)
    assert "s, m, h, d or w" in said and "'M' is not months" in said
    assert "\n" not in said
