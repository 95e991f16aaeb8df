"""Property-based tests (hypothesis): the carry codec round trip in memory, and the schema
identifier validation of the SQL templates. The round trip through PostgreSQL's jsonb is
in tests/integration/test_jsonb_round_trip.py."""

from __future__ import annotations

import string
from typing import Any

import msgspec
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tests.support.strategies import CARRY, TEXT, Carry, Inner
from venturi import ConfigError, sql
from venturi.codecs import CarryCodec
from venturi.runtime.worker import Worker

CODEC: CarryCodec[Carry] = CarryCodec(Carry, "prop", 1 << 20)


# --- the codec, in memory --------------------------------------------------------------------


@given(CARRY)
@settings(max_examples=300, deadline=None)
def test_codec_round_trip(carry: Carry) -> None:
    text = CODEC.encode(carry)
    assert isinstance(text, str)
    assert CODEC.decode(text) == carry
    assert CODEC.encode(CODEC.decode(text)) == text  # encoding is canonical


@pytest.mark.parametrize("x", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_refused_not_turned_into_null(x: float) -> None:
    codec: CarryCodec[Any] = CarryCodec(float, "prop", 1000)
    with pytest.raises(TypeError, match="carry of task 'prop' must be float"):
        codec.encode(x)


@given(
    st.one_of(
        st.none(),
        st.integers(),
        TEXT,
        st.lists(st.integers(), max_size=3),
        st.dictionaries(TEXT, st.integers(), max_size=3),
        st.builds(Inner, name=TEXT),
    )
)
def test_other_types_refused_before_anything_is_written(value: Any) -> None:
    with pytest.raises(TypeError, match="carry of task 'prop' must be Carry"):
        CODEC.encode(value)


@given(CARRY, st.sampled_from(["text", "n", "flag", "items", "inner", "when"]), st.integers())
def test_a_struct_with_a_wrong_field_type_is_refused(carry: Carry, field: str, bad: int) -> None:
    """Structs do not check their fields on construction; the codec must."""
    wrong: Any = str(bad) if field in ("n", "items", "inner", "when") else bad
    if field == "flag":
        wrong = "yes"
    broken = msgspec.structs.replace(carry, **{field: wrong})
    # The line names the field, not the Struct it already is.
    with pytest.raises(TypeError, match=rf"^carry of task 'prop': Carry\.{field}\b"):
        CODEC.encode(broken)


@given(st.text(st.sampled_from(["\x00", "\\", "u", "0", "a"]), max_size=12))
@example("\\u0000")  # a backslash and the letters: stored as they are
@example("\\\x00")  # a backslash, then a NUL
def test_a_nul_is_refused_and_only_a_nul(text: str) -> None:
    """The NUL test reads the encoded JSON's escapes: a NUL character encodes as the
    escape \\u0000, a backslash followed by the letters u0000 as an escaped backslash
    and the letters, which jsonb stores."""
    codec: CarryCodec[Any] = CarryCodec(str, "prop", 1000)
    if "\x00" in text:
        with pytest.raises(ValueError, match="holds a NUL character"):
            codec.encode(text)
    else:
        assert codec.decode(codec.encode(text)) == text


@given(TEXT, st.integers(min_value=2, max_value=400))
@example("x" * 98, 100)
@example("x" * 99, 100)
def test_size_limit_is_exact(text: str, limit: int) -> None:
    codec: CarryCodec[Any] = CarryCodec(str, "prop", limit)
    size = len(msgspec.json.encode(text))
    if size <= limit:
        assert codec.decode(codec.encode(text)) == text
    else:
        with pytest.raises(ValueError, match=f"is {size} bytes encoded, over the limit of {limit}"):
            codec.encode(text)


# --- the codec, through PostgreSQL ----------------------------------------------------------


# --- schema identifiers -----------------------------------------------------------------------

LOWER = set(string.ascii_lowercase + "_")
REST = LOWER | set(string.digits)


def acceptable(name: object) -> bool:
    """The rule, written independently of the library's regex."""
    return (
        isinstance(name, str)
        and 1 <= len(name) <= 55
        and name[0] in LOWER
        and all(c in REST for c in name[1:])
        and not name.startswith("pg_")  # PostgreSQL's own schemas
    )


NAMES = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,60}", fullmatch=True),
    st.text(alphabet=string.ascii_letters + string.digits + "_-;\"' .$\n\x00é", max_size=70),
    st.text(max_size=60),
    st.sampled_from(["venturi", "jobs", "s", "_", "a" * 55, "a" * 56, "public", "pg_x"]),
)


@given(st.one_of(NAMES, st.none(), st.integers(), st.binary(max_size=10)))
@settings(max_examples=400)
@example("venturi\n")
@example('x"; DROP TABLE jobs; --')
def test_schema_name_validation_matches_the_rule_everywhere(name: Any) -> None:
    if acceptable(name):
        assert sql.validate_schema(name) == name
        assert sql.channel(name) == f"{name}_pending"
        assert len(sql.channel(name).encode()) <= 63  # PostgreSQL's identifier limit
        assert f'"{name}".jobs' in sql.statement("job_claim", name)
        return
    for use in (
        sql.validate_schema,
        sql.channel,
        lambda n: sql.statement("job_claim", n),
        lambda n: sql.render(n, "tables"),
        lambda n: Worker(None, "postgresql://x", schema=n),
    ):
        with pytest.raises(ConfigError, match="schema must be a lower-case SQL identifier"):
            use(name)


def _normalized(text: str, name: str) -> str:
    """The rendering with the schema name's four sanctioned spellings replaced."""
    return (
        text.replace(f'"{name}"', '"<S>"')
        .replace(f"'{name}_pending'", "'<S>_pending'")
        .replace(f"'{name}_done'", "'<S>_done'")
        .replace(f"PREPARE {name}_", "PREPARE <S>_")
    )


DEFAULT = {part: _normalized(sql.render("venturi", part), "venturi") for part in sql.PARTS}


@given(st.from_regex(r"[a-z_][a-z0-9_]{0,54}", fullmatch=True), st.sampled_from(sql.PARTS))
@settings(max_examples=100, deadline=None)
def test_a_valid_name_appears_only_as_a_quoted_identifier(name: str, part: str) -> None:
    """Rendering for any valid name differs from the default rendering only where the
    schema is named: quoted, in the channel literals and in PREPARE names."""
    assume(name != "venturi")
    assert _normalized(sql.render(name, part), name) == DEFAULT[part]
