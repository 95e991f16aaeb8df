"""Hypothesis strategies the property tests share: a carry with every kind of field
msgspec and jsonb hold, as the codec tests (unit) and the jsonb round trip (integration)
draw it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import msgspec
from hypothesis import strategies as st

# Text PostgreSQL can hold: no lone surrogates (not even UTF-8) and no NUL (jsonb and text
# refuse it). Both are bad input with tests of their own in test_bad_input.py.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
KEYS = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8)


class Inner(msgspec.Struct):
    name: str
    tags: list[str] = []
    score: float | None = None


class Carry(msgspec.Struct):
    text: str
    n: int
    x: float
    flag: bool
    items: list[int]
    mapping: dict[str, int]
    inner: Inner
    maybe: int | None
    nested: list[Inner]
    pair: tuple[int, str]
    raw: bytes
    when: datetime
    mode: Literal["fast", "slow"]


INNER = st.builds(
    Inner,
    name=TEXT,
    tags=st.lists(TEXT, max_size=3),
    score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
)
CARRY = st.builds(
    Carry,
    text=TEXT,
    # Any size: msgspec and jsonb (numeric) both keep big integers exact.
    n=st.integers(),
    x=st.floats(allow_nan=False, allow_infinity=False),
    flag=st.booleans(),
    items=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=5),
    mapping=st.dictionaries(KEYS, st.integers(min_value=-(2**31), max_value=2**31), max_size=4),
    inner=INNER,
    maybe=st.none() | st.integers(min_value=-(2**31), max_value=2**31),
    nested=st.lists(INNER, max_size=3),
    pair=st.tuples(st.integers(min_value=0, max_value=10**6), TEXT),
    raw=st.binary(max_size=64),
    when=st.datetimes(timezones=st.just(UTC)),
    mode=st.sampled_from(["fast", "slow"]),
)
