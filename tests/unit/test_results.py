"""result_ttl and ResultCleanup's knobs are checked when set."""

from __future__ import annotations

from typing import Any

import pytest

import venturi
from tests.support.carries import noop_task
from venturi import ConfigError, ResultCleanup
from venturi.codecs import encode_any


@pytest.mark.parametrize("bad", [0, -1, "1h", True, float("nan")])
def test_bad_result_ttl(bad: Any, kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="result_ttl"):
        noop_task("r_bad", result_ttl=bad)


@pytest.mark.parametrize("knob", [{"batch": 0}, {"batch": 1.5}, {"interval": 0}])
def test_bad_result_cleanup(knob: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="result_cleanup"):
        ResultCleanup(**knob)


def test_a_value_nested_past_the_encoders_depth_is_a_type_error() -> None:
    # A result, a step's value or a signal's payload nested a thousand deep raised
    # RecursionError out of msgspec's encoder: venturi.signal and admin.send_signal, whose
    # docs promise TypeError for a payload they cannot encode, let it through.
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(TypeError, match="the payload is not msgspec-encodable: nested too deeply"):
        encode_any(deep, "the payload")
    assert encode_any([[1]], "the payload") == "[[1]]"


def test_a_carry_nested_past_the_encoders_depth_is_a_type_error(kinds: list[str]) -> None:
    # The same RecursionError came out of an enqueue of such a carry (Any-typed).
    @venturi.task(kind="deep_carry")
    async def handler(ctx: venturi.Context[Any], carry: Any) -> None: ...

    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(TypeError, match="carry of task 'deep_carry' is nested too deeply"):
        handler.job(deep)
