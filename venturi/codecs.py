"""msgspec codecs for carries and results, built once per task and reused.

msgspec encodes and decodes Structs, dataclasses, attrs classes and the builtin types
itself; Pydantic v2 models (the ``pydantic`` extra) go through ``enc_hook`` and
``dec_hook``: encoded as their JSON form (by alias, without computed fields), decoded
by the model's JSON validation, whose error becomes one line. Pydantic is never imported here: a model can only exist
once its application imported it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import re
import sys
import types
import typing
from typing import Any, Generic, TypeVar

import msgspec

C = TypeVar("C")


def _model_base() -> Any:
    """``pydantic.BaseModel`` if the application imported Pydantic, else None."""
    module = sys.modules.get("pydantic")
    return None if module is None else getattr(module, "BaseModel", None)


def is_model_type(tp: Any) -> bool:
    """Whether ``tp`` is a Pydantic model class."""
    base = _model_base()
    return base is not None and isinstance(tp, type) and issubclass(tp, base)


def pydantic_error(exc: Exception) -> str:
    """Pydantic's own ValidationError in one line: its header, then each error's place
    and message (``1 validation error for Signup: email: Field required``)."""
    errors = getattr(exc, "errors", None)
    lines = str(exc).splitlines()
    head = lines[0] if lines else type(exc).__name__
    if not callable(errors):
        return head
    parts = []
    for e in errors(include_url=False):
        where = ".".join(str(x) for x in e.get("loc", ()))
        parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
    return f"{head}: {'; '.join(parts)}" if parts else head


class Lossy(TypeError):
    """A model whose stored form is not the model: a secret field (dumped masked), an
    excluded field (not dumped). The handler would get another value, silently."""


def enc_hook(value: Any) -> Any:
    """msgspec's hook for what it cannot encode itself: a Pydantic model's JSON form."""
    base = _model_base()
    if base is not None and isinstance(value, base):
        lost = lossy_fields(type(value))
        if lost:
            raise Lossy(lost)
        return value.model_dump(**_dump_options(base, type(value)))
    # msgspec's own words for a type it cannot encode (encode_any catches TypeError).
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


def _dump_options(base: Any, model: Any) -> dict[str, Any]:
    """``model_dump``'s arguments for the form the model's JSON validation reads back:
    fields under their names (``dec_hook`` reads names and aliases: dumped by alias, a
    field whose alias is for serialization only, ``Field(serialization_alias=)`` or an
    ``AliasGenerator``'s, was not read back, and with a default came back as the default),
    ``Json`` fields as JSON text (``round_trip``), and no computed fields (a model with
    ``extra="forbid"`` refuses them as extra inputs)."""
    if _has_exclude_computed(base):
        return _DUMP | {"exclude_computed_fields": True}
    # Pydantic before 2.12 has no such keyword: the model's own computed fields are left
    # out by name (a nested model's are still dumped there).
    return _DUMP | {"exclude": set(model.model_computed_fields) or None}


_DUMP: dict[str, Any] = {"mode": "json", "by_alias": False, "round_trip": True}


@functools.cache
def _has_exclude_computed(base: Any) -> bool:
    return "exclude_computed_fields" in inspect.signature(base.model_dump).parameters


@functools.cache
def _validate_options(base: Any) -> dict[str, Any]:
    """``model_validate_json``'s arguments: field names read as well as aliases (the
    stored form is by name; Pydantic 2.11 added ``by_name``: before it, a field with an
    alias reads back only with the model's own ``populate_by_name``)."""
    params = inspect.signature(base.model_validate_json).parameters
    return {"by_name": True} if "by_name" in params else {}


def dec_hook(tp: Any, value: Any) -> Any:
    """msgspec's hook for a type it cannot decode itself: a Pydantic model validated from
    the JSON value (its error in one line, which msgspec reports as a ValidationError).
    Validated as JSON, as it was dumped: a strict model takes an ISO string for its
    datetime there, and refuses it in Python mode."""
    if is_model_type(tp):
        base = sys.modules["pydantic"]
        try:
            return tp.model_validate_json(
                _ENCODER.encode(value), **_validate_options(base.BaseModel)
            )
        except base.ValidationError as exc:
            raise ValueError(pydantic_error(exc)) from None
    # msgspec's own words when no hook is given (it reports this as a ValidationError).
    raise TypeError(f"Expected `{_name(tp)}`, got `{type(value).__name__}`")


def lossy_fields(model: Any) -> str:
    """Which fields of Pydantic model class ``model``, or of the models its fields hold,
    are stored otherwise than they are, in one line ("" for none); once per class. A
    value under ``Any`` and a serializer of the application's own are not seen here."""
    try:
        return _LOSSY[model]
    except KeyError:
        found = _LOSSY[model] = "; ".join(_lost(model, set()))
        return found


_LOSSY: dict[Any, str] = {}


def _lost(model: Any, seen: set[Any]) -> list[str]:
    seen.add(model)
    decorators = model.__pydantic_decorators__
    if decorators.model_serializers:
        return []  # the model writes itself: what it stores is its own to say
    # Fields the model's own serializers write (a secret revealed on purpose, Pydantic's
    # documented way): their stored form is the application's, not a mask.
    written = {f for d in decorators.field_serializers.values() for f in d.info.fields}
    found = []
    for name, info in model.model_fields.items():
        where = f"{model.__qualname__}.{name}"
        if info.exclude is True or getattr(info, "exclude_if", None) is not None:
            found.append(f"{where} has Field(exclude=True), left out of the stored value")
        elif name not in written and "*" not in written:
            found += _lost_in(where, info.annotation, seen)
    return found


def _lost_in(where: str, annotation: Any, seen: set[Any]) -> list[str]:
    """A secret in ``annotation`` (the field ``where``), or in the models, dataclasses and
    TypedDicts it holds (Pydantic dumps a secret masked wherever it is)."""
    pydantic = sys.modules["pydantic"]
    secret = tuple(
        t
        for t in (pydantic.SecretStr, pydantic.SecretBytes, getattr(pydantic, "Secret", None))
        if t
    )
    found: list[str] = []
    for tp in _types_in(annotation):
        if isinstance(tp, type) and issubclass(tp, secret):
            shown = tp.__name__.split("[")[0]
            return [f"{where} is a {shown}, stored masked as '**********'"]
        if tp in seen:
            continue
        if is_model_type(tp):
            found += _lost(tp, seen)
        elif isinstance(tp, type) and (dataclasses.is_dataclass(tp) or _is_typeddict(tp)):
            seen.add(tp)
            try:
                hints = typing.get_type_hints(tp)
            except Exception:  # a forward reference this module cannot resolve: unseen
                continue
            for name, hint in hints.items():
                found += _lost_in(f"{tp.__qualname__}.{name}", hint, seen)
    return found


def _is_typeddict(tp: type) -> bool:
    """A TypedDict class, typing's or typing_extensions' (Pydantic asks for the latter
    before Python 3.12, and typing.is_typeddict does not know it there)."""
    return issubclass(tp, dict) and hasattr(tp, "__total__") and hasattr(tp, "__annotations__")


def _types_in(annotation: Any) -> list[Any]:
    """``annotation`` and every type inside it (``list[Creds] | None``: list, Creds, None),
    a generic's origin among them (``Secret[int]``: Secret)."""
    found, todo = [], [annotation]
    while todo:
        tp = todo.pop()
        found.append(tp)
        origin = typing.get_origin(tp)
        if origin is not None:
            found.append(origin)
        todo += [a for a in typing.get_args(tp) if not isinstance(a, (str, int, float))]
    return found


# One encoder for everything: msgspec encoders are type-independent and thread-safe.
_ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)
_ANY_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


def decode_as(text: str | bytes, tp: Any) -> Any:
    """JSON text decoded as ``tp`` (Pydantic models included); msgspec's errors."""
    return msgspec.json.decode(text, type=tp, dec_hook=dec_hook)


# A JSON \u0000 escape preceded by an even number of backslashes (an odd number would
# make it an escaped backslash followed by the letters "u0000").
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def has_nul(text: str) -> bool:
    """Whether encoded JSON holds a NUL character, which jsonb refuses. Tested on the
    decoded text: a substring test of a str costs a tenth of one of bytes (17 against
    136 ns for a short carry), and every carry of a bulk enqueue pays it."""
    return "\\u0000" in text and _NUL.search(text) is not None


# A msgpack float64 (msgspec writes every float so) whose exponent is all ones: NaN or
# an infinity, of either sign.
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")


def _scan_hook(value: Any) -> Any:
    """The floats of what msgspec does not know: a model's, as Python holds them (its
    JSON dump has made a NaN null already); anything else holds none msgspec sees."""
    base = _model_base()
    if base is not None and isinstance(value, base):
        return value.model_dump(**_dump_options(base, type(value)) | {"mode": "python"})
    return None


_SCAN = msgspec.msgpack.Encoder(enc_hook=_scan_hook)


def non_finite(value: Any, text: str) -> bool:
    """Whether ``value``, encoded as JSON ``text``, holds NaN or an infinity, which JSON
    stores as null. Almost free for a value without a null in its text (a substring
    test, which callers make first to spare the call); else its msgpack form searched
    in C, and walked only on a hit."""
    if "null" not in text:
        return False
    try:
        data = _SCAN.encode(value)
    except OverflowError:  # an int past 64 bits, which JSON holds and msgpack does not
        todo = [msgspec.to_builtins(value, enc_hook=_scan_hook)]
    else:
        if _NON_FINITE.search(data) is None:
            return False
        # A hit may be bytes that look like one: the decoded floats say.
        todo = [msgspec.msgpack.decode(data)]
    while todo:
        item = todo.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            todo += item.keys()
            todo += item.values()
        elif isinstance(item, list):
            todo += item
    return False


def _nan(what: str) -> TypeError:
    return TypeError(f"{what} holds NaN or infinity, which JSON cannot store")


def text_safe(text: str) -> str:
    """Diagnostic text (an error, a reason) made storable: PostgreSQL text cannot hold NUL."""
    return text.replace("\x00", "\\x00")


# The deepest a stored value may nest (arrays and objects). msgspec's encoder and decoder
# recurse once a level, against Python's recursion limit from wherever they are called:
# a value encoded at the top of a stack 982 levels deep then failed to decode deeper in
# one (venturi.get_job, testing.drain: RecursionError). Past a record's shape (a thread of
# comments 60 replies deep nests 120), and 800 frames within the limit for a reader.
MAX_NESTING = 200
# A JSON string once its escaped backslashes and quotes are out.
_STRING = re.compile(rb'"[^"]*"')
# Every byte but the four brackets and the quote, deleted by bytes.translate.
_NOT_KEPT = bytes(sorted(set(range(256)) - set(b'[]{}"')))
# A bracket's change of depth, indexed by its byte.
_STEP = [0] * 256
for _open in b"[{":
    _STEP[_open] = 1
for _close in b"]}":
    _STEP[_close] = -1


def too_deep(text: str) -> bool:
    """Whether JSON ``text`` nests deeper than ``MAX_NESTING``. Read only when it holds
    more brackets than that (a count in C), so a usual value pays two scans of its text.
    Then in a few C calls, never a Python step per bracket (a 12 MB value holds a
    million of them, which took half a second of a worker's event loop)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    data = text.encode()
    if b"\\" in data:
        # Escaped backslashes, then escaped quotes, out (left to right, as JSON pairs
        # them): every quote left opens or closes a string.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # The brackets and quotes only. A quote pair next to each other is an empty string,
    # or two strings with no bracket between them (merged): either way the pair goes
    # in one C call, and only strings holding brackets are left for the regex.
    kept = data.translate(None, _NOT_KEPT).replace(b'""', b"")
    if b'"' in kept:
        kept = _STRING.sub(b"", kept)
    return max(itertools.accumulate(map(_STEP.__getitem__, kept)), default=0) > MAX_NESTING


def _deep(what: str) -> TypeError:
    return TypeError(f"{what} is nested deeper than {MAX_NESTING} arrays or objects")


def _unencodable(exc: ValueError, what: str, refused: str) -> TypeError:
    """The TypeError for a model Pydantic could not dump (its errors are ValueErrors:
    bytes that are not UTF-8, an unknown object under ``Any``, a cycle, its own depth
    limit), in the words of the other refusals of ``what``."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "depth" in text:  # "Maximum serialization depth exceeded", past MAX_NESTING
        return _deep(what)
    return TypeError(f"{refused}: {text}")


def encode_any(value: Any, what: str = "value") -> str:
    """JSON text for a msgspec-encodable ``value`` (a result, say)."""
    try:
        data = _ENCODER.encode(value)
    except Lossy as exc:
        raise TypeError(f"{what} cannot be stored as it is: {exc}") from None
    except (TypeError, msgspec.EncodeError) as exc:
        raise TypeError(f"{what} is not msgspec-encodable: {exc}") from None
    except RecursionError:
        raise _deep(what) from None
    except ValueError as exc:
        raise _unencodable(exc, what, f"{what} is not msgspec-encodable") from None
    text = data.decode()
    if too_deep(text):
        raise _deep(what)
    if has_nul(text):
        raise ValueError(f"{what} holds a NUL character (\\u0000), which PostgreSQL cannot store")
    if "null" in text and non_finite(value, text):
        raise _nan(what)
    return text


def decode_any(text: str | None) -> Any:
    """Plain Python values from JSON text (``None`` stays ``None``)."""
    return None if text is None else _ANY_DECODER.decode(text)


class CarryCodec(Generic[C]):
    """Encodes and checks the carries of one task type."""

    __slots__ = ("_decoder", "_exact", "carry_type", "max_bytes", "owner")

    def __init__(self, carry_type: Any, owner: str, max_bytes: int) -> None:
        self.carry_type = carry_type
        self.owner = owner
        self.max_bytes = max_bytes
        self._decoder: msgspec.json.Decoder[C] = msgspec.json.Decoder(carry_type, dec_hook=dec_hook)
        # A plain class (a Struct, str, int ...) also demands an instance of itself: a
        # dict shaped like a Struct encodes the same but is not that carry.
        self._exact = (
            carry_type
            # typing.Any is a class since 3.11, but not one to isinstance() against.
            if inspect.isclass(carry_type)
            and carry_type is not Any
            and not isinstance(carry_type, types.GenericAlias)
            else None
        )

    def _refused(self, carry: Any) -> str:
        # Made only on a refusal: formatted for every carry, it cost a bulk enqueue 0.4 us
        # a job (a third of Task.job's time).
        return (
            f"carry of task {self.owner!r} must be {_name(self.carry_type)}, "
            f"got {type(carry).__name__}"
        )

    def encode(self, carry: Any) -> str:
        """Validated JSON text for ``carry``; ``TypeError`` when it is not a carry of this task.

        The carry goes through the typed decoder once: msgspec Structs do not check their
        field types on construction, and a bad carry must fail here, before any write,
        not later in a worker.
        """
        if self._exact is not None and not isinstance(carry, self._exact):
            raise TypeError(
                f"carry of task {self.owner!r} must be {_name(self.carry_type)}, "
                f"got {type(carry).__name__}"
            )
        try:
            data = _ENCODER.encode(carry)
        except Lossy as exc:
            raise TypeError(
                f"carry of task {self.owner!r} cannot be stored as it is: {exc}"
            ) from None
        except (TypeError, msgspec.EncodeError) as exc:
            raise TypeError(f"{self._refused(carry)}: {exc}") from None
        except RecursionError:
            raise _deep(f"carry of task {self.owner!r}") from None
        except ValueError as exc:
            raise _unencodable(exc, f"carry of task {self.owner!r}", self._refused(carry)) from None
        text = data.decode()
        # Before the decode: a model's JSON validation has a depth limit of its own, and
        # its error would say "recursion limit exceeded" for what is too deep here.
        if too_deep(text):
            raise _deep(f"carry of task {self.owner!r}")
        try:
            self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise self._invalid(carry, str(exc)) from None
        except RecursionError:
            raise _deep(f"carry of task {self.owner!r}") from None
        # After the decode: a NaN where a float belongs is named there, with its field.
        # The substring test first, inline: a bulk enqueue's carries pay it and no call.
        if "null" in text and non_finite(carry, text):
            raise _nan(f"carry of task {self.owner!r}")
        if has_nul(text):
            raise ValueError(
                f"carry of task {self.owner!r} holds a NUL character (\\u0000), which "
                "PostgreSQL cannot store in jsonb"
            )
        if len(data) > self.max_bytes:
            raise ValueError(
                f"carry of task {self.owner!r} is {len(data)} bytes encoded, over the "
                f"limit of {self.max_bytes} (max_carry_bytes)"
            )
        return text

    def _invalid(self, carry: Any, error: str) -> TypeError:
        """The one line of a carry of the right type whose content is not (a field of a
        Struct holding a str where an int belongs, a NaN where a float belongs): where,
        what it must be, what it is."""
        name = _name(self.carry_type)
        found = _VALIDATION.fullmatch(error)
        if found is None:
            return TypeError(f"carry of task {self.owner!r}: {name}: {error.replace('`', '')}")
        what, at = found["what"].replace("`", ""), found["at"]
        wrong = _EXPECTED.fullmatch(found["what"])
        if at and wrong:
            return TypeError(
                f"carry of task {self.owner!r}: {name}{at} must be {wrong['expected']}, "
                f"got {wrong['got']}"
            )
        if at:
            return TypeError(f"carry of task {self.owner!r}: {name}{at}: {what}")
        if wrong:
            # The value is of the type, but not one JSON holds (a NaN float encodes as null).
            return TypeError(
                f"carry of task {self.owner!r} must be {name}, got {type(carry).__name__} "
                f"{carry!r:.50}, which encodes as {wrong['got']}"
            )
        return TypeError(f"carry of task {self.owner!r} must be {name}: {what}")

    def decode(self, text: str | bytes) -> C:
        """The carry from stored JSON; raises ``msgspec.DecodeError`` if it no longer fits."""
        return self._decoder.decode(text)


# msgspec's validation messages: "Expected `int`, got `str` - at `$.items[1]`",
# "Object missing required field `name` - at `$.inner`" (no " - at" for the carry itself).
_VALIDATION = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<at>[^`]*)`)?", re.DOTALL)
_EXPECTED = re.compile(r"Expected `(?P<expected>[^`]+)`, got `(?P<got>[^`]+)`")


def _name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)
