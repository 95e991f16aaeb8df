"""What a handler's signature says: the carry type of ``(ctx, carry)`` (``@venturi.task``
checks it when it is applied), and the carry a cron task's jobs get."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from venturi.errors import ConfigError


def handler_carry_type(fn: Callable[..., Any], kind: str) -> Any:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"task {kind!r}: the handler has no signature: {exc}") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2:
        raise ConfigError(
            f"task {kind!r}: the handler must take (ctx, carry), got {len(positional)} "
            "positional parameter(s)"
        )
    param = positional[1]
    annotation = param.annotation
    if annotation is inspect.Parameter.empty:
        raise ConfigError(
            f"task {kind!r}: carry: the handler's second parameter {param.name!r} needs a "
            "type annotation (a msgspec.Struct or any msgspec-supported type)"
        )
    if isinstance(annotation, str):
        # `from __future__ import annotations`: resolve just this one name, since the
        # context annotation may name a type that only exists under TYPE_CHECKING.
        try:
            annotation = typing.get_type_hints(fn).get(param.name, annotation)
        except Exception:
            try:
                annotation = eval(annotation, getattr(fn, "__globals__", {}))
            except Exception as exc:
                raise ConfigError(
                    f"task {kind!r}: carry: cannot resolve annotation {annotation!r}: {exc}"
                ) from None
    try:
        msgspec.json.Decoder(annotation)
    except TypeError as exc:
        raise ConfigError(
            f"task {kind!r}: carry: {annotation!r} is not a type msgspec can decode: {exc}"
        ) from None
    return annotation


def default_cron_carry(carry_type: Any, kind: str) -> Any:
    """The carry of a cron task's jobs: ``None`` for a ``None`` carry, else the carry
    type built with no arguments."""
    if carry_type is None or carry_type is type(None):
        return None
    try:
        return carry_type()
    except Exception as exc:
        raise ConfigError(
            f"task {kind!r}: cron: the carry type must build with no arguments (give every "
            f"field a default), or schedule it with venturi.schedule(task, cron, carry): {exc}"
        ) from None
