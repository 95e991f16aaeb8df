"""Retry delays: how long a failed job stays invisible before its next attempt."""

from __future__ import annotations

import random
from datetime import timedelta

import msgspec

from venturi import validate
from venturi.errors import ConfigError
from venturi.validate import seconds


class Backoff(msgspec.Struct, frozen=True):
    """A retry delay policy. Build it with ``Backoff.fixed`` or ``Backoff.exponential``."""

    base: float
    factor: float = 2.0
    cap: float = 3600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        # Built directly, it is checked as the two builders check theirs: a base of 1e15 s
        # passed, and every failure's retry then failed to be stored (its job went dead).
        b = seconds(self.base, "backoff base", allow_zero=True)
        c = seconds(self.cap, "backoff cap", allow_zero=True)
        factor = self.factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor >= 1:
            raise ConfigError(f"backoff factor must be a number >= 1, got {validate.shown(factor)}")
        if c < b:
            raise ConfigError(f"backoff cap ({c}s) must not be below its base ({b}s)")
        # Stored as a boolean column: jitter=0 or "no" passed here, and then every enqueue
        # of the task failed in the driver with a traceback.
        if not isinstance(self.jitter, bool):
            raise ConfigError(
                f"backoff jitter must be True or False, got {validate.shown(self.jitter)}"
            )

    @classmethod
    def fixed(cls, delay: timedelta | float) -> Backoff:
        """Every retry waits ``delay``."""
        d = seconds(delay, "backoff delay", allow_zero=True)
        return cls(base=d, factor=1.0, cap=d, jitter=False)

    @classmethod
    def exponential(
        cls,
        base: timedelta | float = 1.0,
        factor: float = 2.0,
        cap: timedelta | float = 3600.0,
        jitter: bool = True,
    ) -> Backoff:
        """Retry n waits ``min(cap, base * factor**(n-1))``; jitter draws it from [d/2, d]."""
        b = seconds(base, "backoff base")
        c = seconds(cap, "backoff cap")
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            raise ConfigError(f"backoff factor must be a number >= 1, got {validate.shown(factor)}")
        return cls(base=b, factor=float(factor), cap=c, jitter=jitter)

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed execution (1-based)."""
        n = max(failures, 1) - 1
        # min() before the power would overflow: factor**n grows past float range fast.
        try:
            d = min(self.cap, self.base * self.factor**n)
        except OverflowError:
            d = self.cap
        if self.jitter:
            # Half-jitter: never retries sooner than half the delay, spreads a herd.
            d = d / 2 + random.random() * d / 2
        return d


DEFAULT_BACKOFF = Backoff.exponential(1.0, 2.0, 3600.0, True)
