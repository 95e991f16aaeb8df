"""result_ttl and ResultCleanup's knobs are checked when set."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import venturi
from tests.support.carries import noop_task
from venturi import ConfigError, ResultCleanup
from venturi.codecs import MAX_NESTING, encode_any


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
    # RecursionError out of msgspec's encoder (venturi.signal promises TypeError); and
    # one nested 982 deep was stored, then failed to decode a hundred frames deeper
    # (venturi.get_job, testing.drain). Past MAX_NESTING levels nothing is stored.
    for levels in (MAX_NESTING + 1, 5_000):
        deep: Any = []
        for _ in range(levels - 1):
            deep = [deep]
        with pytest.raises(TypeError, match=f"the payload is nested deeper than {MAX_NESTING}"):
            encode_any(deep, "the payload")
    within: Any = [1]
    for _ in range(MAX_NESTING - 1):
        within = {"a": within}
    assert encode_any(within, "the payload").count("{") == MAX_NESTING - 1
    brackets = '"[[[' * 200 + '"'  # in a string: text, not nesting
    assert msgspec.json.decode(encode_any([brackets], "the payload")) == [brackets]


def test_a_carry_nested_past_the_encoders_depth_is_a_type_error(kinds: list[str]) -> None:
    # The same at an enqueue of such a carry (Any-typed).
    @venturi.task(kind="deep_carry")
    async def handler(ctx: venturi.Context[Any], carry: Any) -> None: ...

    for levels in (MAX_NESTING + 1, 5_000):
        deep: Any = []
        for _ in range(levels - 1):
            deep = [deep]
        with pytest.raises(TypeError, match="carry of task 'deep_carry' is nested deeper than"):
            handler.job(deep)
    assert handler.job([[1]]).carry == "[[1]]"
