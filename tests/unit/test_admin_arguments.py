"""The operator API's argument checks: durations as an operator writes them."""

from __future__ import annotations

import pytest

from venturi import admin
from venturi.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1h30m", 5400)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert admin.parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "7", "d", "7x", "-1d", "1h 30m", "7dd"])
def test_parse_duration_refuses(bad: str) -> None:
    with pytest.raises(ConfigError, match="a duration is"):
        admin.parse_duration(bad)
