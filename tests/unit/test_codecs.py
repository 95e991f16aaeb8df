"""venturi.codecs on values it must refuse: one line, a TypeError naming the value, from
wherever the value is given (a carry, a result or step value, a signal's payload)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretBytes, SecretStr, field_serializer
from typing_extensions import TypedDict

from venturi.codecs import MAX_NESTING, CarryCodec, encode_any, too_deep
from venturi.workflow.signals import checked_signal


class Blob(BaseModel):
    b: bytes


class Anything(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    x: Any


class Node(BaseModel):
    child: Node | None = None


class Opaque:
    pass


def _cyclic() -> Node:
    node = Node()
    node.child = node
    return node


def _nested(depth: int) -> Node:
    node = Node()
    for _ in range(depth - 1):
        node = Node(child=node)
    return node


def _refusals(value: Any) -> list[str]:
    """The messages of the carry, the result and the signal payload ``value`` refused."""
    messages = []
    for attempt in (
        lambda: CarryCodec(type(value), "k", 1 << 20).encode(value),
        lambda: encode_any(value, "result"),
        lambda: checked_signal(1, "s", value),
    ):
        with pytest.raises(TypeError) as caught:
            attempt()
        messages.append(str(caught.value))
    return messages


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (Blob(b=b"\xff\x00"), "utf-8"),
        (Anything(x=Opaque()), "Unable to serialize unknown type"),
        (_cyclic(), "Circular reference"),
    ],
)
def test_a_model_pydantic_cannot_serialize_is_a_type_error_naming_the_value(
    value: Any, why: str
) -> None:
    carry, result, payload = _refusals(value)
    name = type(value).__name__
    assert carry.startswith(f"carry of task 'k' must be {name}, got {name}: ")
    assert result.startswith("result is not msgspec-encodable: ")
    assert payload.startswith("signal 's': the payload is not msgspec-encodable: ")
    assert all(why in m and "\n" not in m for m in (carry, result, payload))


def test_a_model_nested_past_pydantic_s_own_depth_is_refused_as_too_deep() -> None:
    carry, result, payload = _refusals(_nested(300))
    deep = f"nested deeper than {MAX_NESTING} arrays or objects"
    assert carry == f"carry of task 'k' is {deep}"
    assert result == f"result is {deep}"
    assert payload == f"signal 's': the payload is {deep}"


def test_a_model_one_level_too_deep_is_refused_as_too_deep_not_by_its_validation() -> None:
    assert CarryCodec(Node, "k", 1 << 20).encode(_nested(MAX_NESTING))
    carry = _refusals(_nested(MAX_NESTING + 1))[0]
    assert carry == f"carry of task 'k' is nested deeper than {MAX_NESTING} arrays or objects"


def test_too_deep_reads_a_large_value_in_a_few_calls_not_one_per_bracket() -> None:
    # A 12 MB value held 1M brackets, and a Python step per bracket took 2 s of the
    # worker's event loop: the whole text is read by a handful of C calls.
    shallow = "[" + ",".join(['{"a":[1,"]]]{{"]}'] * 20_000) + "]"
    deep = '{"s":"[[[","v":' + "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "}"
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += 1

    sys.setprofile(count)
    try:
        results = too_deep(shallow), too_deep(deep)
    finally:
        sys.setprofile(None)
    assert results == (False, True)
    assert calls < 100


class Creds(BaseModel):
    user: str
    token: SecretStr
    key: SecretBytes | None = None


class Flags(BaseModel):
    name: str
    retries: int = Field(default=0, exclude=True)


class Login(BaseModel):
    at: int
    creds: list[Creds]


class Wrapped(msgspec.Struct):
    login: Login


def test_a_model_stored_otherwise_than_it_is_is_refused_naming_its_fields() -> None:
    # A secret is dumped masked, an excluded field not at all: the handler (a replayed
    # step, a parent) would get another value than the one given, silently.
    creds = Creds(user="ana", token=SecretStr("s3cret"), key=SecretBytes(b"k"))
    secret = (
        "Creds.token is a SecretStr, stored masked as '**********'; "
        "Creds.key is a SecretBytes, stored masked as '**********'"
    )
    carry, result, payload = _refusals(creds)
    assert carry == f"carry of task 'k' cannot be stored as it is: {secret}"
    assert result == f"result cannot be stored as it is: {secret}"
    assert payload == f"signal 's': the payload cannot be stored as it is: {secret}"
    flags = _refusals(Flags(name="x", retries=3))[0]
    assert flags == (
        "carry of task 'k' cannot be stored as it is: Flags.retries has Field(exclude=True), "
        "left out of the stored value"
    )
    # Nested: in another model's list, in a Struct.
    login = Login(at=1, creds=[creds])
    assert _refusals(login)[0] == f"carry of task 'k' cannot be stored as it is: {secret}"
    assert _refusals(Wrapped(login))[0] == f"carry of task 'k' cannot be stored as it is: {secret}"


class Revealed(BaseModel):
    # The model's own serializer writes the secret out (Pydantic's documented way).
    user: str
    token: SecretStr

    @field_serializer("token", when_used="json")
    def _reveal(self, v: SecretStr) -> str:
        return v.get_secret_value()


@dataclasses.dataclass
class InnerCreds:
    token: SecretStr


class InnerTyped(TypedDict):
    token: SecretStr


class Holds(BaseModel):
    inner: InnerCreds
    td: InnerTyped


def test_a_secret_is_refused_where_a_dataclass_or_typeddict_holds_it_not_where_it_is_written_out() -> (
    None
):
    # (Review probe) a field serializer of the model's own stored the secret and was
    # refused as masked; a dataclass or a TypedDict in a model stored it masked, unseen.
    revealed = Revealed(user="ana", token=SecretStr("s3cret"))
    codec: CarryCodec[Revealed] = CarryCodec(Revealed, "k", 1 << 20)
    assert codec.decode(codec.encode(revealed)).token.get_secret_value() == "s3cret"
    holds = Holds(inner=InnerCreds(SecretStr("a")), td={"token": SecretStr("b")})
    assert _refusals(holds)[0] == (
        "carry of task 'k' cannot be stored as it is: "
        "InnerCreds.token is a SecretStr, stored masked as '**********'; "
        "InnerTyped.token is a SecretStr, stored masked as '**********'"
    )


def test_a_model_whose_value_only_changes_shape_is_not_refused() -> None:
    # A tuple under Any comes back a list: the same JSON, not a lost field.
    codec: CarryCodec[Anything] = CarryCodec(Anything, "k", 1 << 20)
    assert codec.decode(codec.encode(Anything(x=(1, 2)))) == Anything(x=[1, 2])


class Reading(BaseModel):
    value: Any


class Point(msgspec.Struct):
    tags: dict[str, Any]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_infinity_where_json_would_store_null_is_refused(bad: float) -> None:
    for value in ({"ratio": bad}, [1.5, [bad]], Reading(value=bad), Point({"x": bad})):
        carry, result, payload = _refusals(value)
        assert carry == "carry of task 'k' holds NaN or infinity, which JSON cannot store"
        assert result == "result holds NaN or infinity, which JSON cannot store"
        assert payload == "signal 's': the payload holds NaN or infinity, which JSON cannot store"


def test_values_that_only_look_like_a_non_finite_float_are_stored() -> None:
    # A null of its own, and bytes whose msgpack form holds a non-finite float's marker.
    for value in ({"a": None, "b": 1e308, "c": -0.0}, [None, b"\xcb\x7f\xf8\x00" * 3]):
        assert encode_any(value)
        assert CarryCodec(Any, "k", 1 << 20).encode(value)
    # An int msgpack cannot hold (JSON can), beside a null and beside a NaN.
    assert encode_any([2**70, None]) == "[1180591620717411303424,null]"
    with pytest.raises(TypeError, match="holds NaN or infinity"):
        encode_any([2**70, float("nan")])
