"""Retention's knobs are checked when it is made."""

from __future__ import annotations

from typing import Any

import pytest

from venturi import ConfigError, Retention


@pytest.mark.parametrize(
    "knob",
    [{"completed": 0}, {"dead": -1}, {"cancelled": "14d"}, {"interval": 0}, {"batch": 0}],
)
def test_bad_retention(knob: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="retention"):
        Retention(**knob)
