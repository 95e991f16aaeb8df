"""What one run knows of its job's records: the recorded steps (a spawn's child id, a
timer's wake time and a signal's timeout among them), read once per run, the names the
run has used, the job's wake_seq and the database's clock as of that read; and how a
recorded value decodes."""

from __future__ import annotations

import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from venturi import db, validate
from venturi.codecs import dec_hook
from venturi.errors import ConfigError
from venturi.workflow.suspend import Unreplayable

# Internal records of a primitive live beside its own record, under its name and a
# suffix after this separator; user names may not hold control characters, so the two
# never collide.
SEP = "\x1f"


@dataclass
class Records:
    """The records of job ``job_id`` as this run knows them. ``steps`` is None until the
    run's first primitive reads them (``WorkflowRun.load``)."""

    job_id: int
    used: set[str] = field(default_factory=set)
    steps: dict[str, db.workflow.Recorded] | None = None
    # The job's wake_seq as the first primitive read it.
    wake_seq: int = 0
    # The database's clock minus this process's, when the steps were loaded.
    skew: float = 0.0

    def loaded(self, loaded: db.workflow.Loaded) -> dict[str, db.workflow.Recorded]:
        """Take what the run's first read found; the steps."""
        self.steps = loaded.steps
        self.wake_seq = loaded.wake_seq
        if loaded.now is not None:
            self.skew = loaded.now.timestamp() - time.time()
        return loaded.steps

    def claim(self, name: object, what: str) -> str:
        """Check ``name`` and mark it used in this run: a name twice is a ConfigError."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ConfigError(
                f"{what}: name must be a non-empty string of at most 200 characters, got {name!r}"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise ConfigError(f"{what}: name must not hold control characters, got {name!r}")
        if name in self.used:
            raise ConfigError(
                f"{what}: the name {name!r} is used twice in one run of job {self.job_id}; "
                "names identify recorded steps and must be unique within the job"
            )
        self.used.add(name)
        return name

    def now(self) -> datetime:
        """The database's clock, as of the first load (timers are decided by it)."""
        return datetime.fromtimestamp(time.time() + self.skew, UTC)

    def after(self, duration: timedelta | float) -> datetime:
        secs = validate.seconds(duration, "duration", allow_zero=True)
        return self.now() + timedelta(seconds=secs)


def return_type(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation (the awaited type of a coroutine function), else Any."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {}) or {}
    annotation = hints.get("return", Any)
    if annotation is None:
        return type(None)
    return annotation if not isinstance(annotation, str) else Any


def decoder(type_: Any, what: str) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of ``type_``, built once per type. ``Unreplayable`` naming
    ``what`` when msgspec cannot decode the type at all (a union of two models): asked
    before a step's function runs and before a job waits for a signal, so the job
    settles dead at once, not after the function's side effect and ``max_failures``
    failed runs, each failing the same way."""
    try:
        return _DECODERS[type_]
    except KeyError:
        pass
    except TypeError:  # an unhashable annotation (Annotated metadata): built each time
        return _build(type_, what)
    built = _build(type_, what)
    if len(_DECODERS) >= 1024:  # types made at run time must not grow it for good
        _DECODERS.clear()
    _DECODERS[type_] = built
    return built


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _build(type_: Any, what: str) -> msgspec.json.Decoder[Any]:
    try:
        return msgspec.json.Decoder(type_, dec_hook=dec_hook)
    except TypeError as exc:
        raise Unreplayable(
            f"{what}: {_name(type_)} is not a type msgspec can decode: {exc}"
        ) from None


def decode(text: str, type_: Any, what: str, *, sent: bool = False) -> Any:
    """A recorded JSON value decoded as ``type_``; ``Unreplayable`` naming ``what`` and
    the type when it does not decode: a recorded value that "no longer decodes", or a
    value that was ``sent`` (a signal's payload) and never decoded as that type."""
    try:
        return decoder(type_, what).decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        how = "the payload sent does not decode" if sent else "the recorded value no longer decodes"
        raise Unreplayable(f"{what}: {how} as {_name(type_)}: {exc}") from None


def _name(type_: Any) -> str:
    """A class by its name; anything else (``Union[Paid, Declined]``, whose qualname is
    just "Union", ``list[int]``) as written."""
    if isinstance(type_, type) and typing.get_origin(type_) is None:
        return type_.__qualname__
    return repr(type_)
