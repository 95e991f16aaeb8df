"""result_ttl and ResultCleanup's knobs are checked when set."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.carries import noop_task
from venturi import ConfigError, ResultCleanup


@pytest.mark.parametrize("bad", [0, -1, "1h", True, float("nan")])
def test_bad_result_ttl(bad: Any, kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="result_ttl"):
        noop_task("r_bad", result_ttl=bad)


@pytest.mark.parametrize("knob", [{"batch": 0}, {"batch": 1.5}, {"interval": 0}])
def test_bad_result_cleanup(knob: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="result_cleanup"):
        ResultCleanup(**knob)
