"""Per-kind rate limits: a token bucket local to each worker."""

from __future__ import annotations

import math
import time

import msgspec

from venturi import validate
from venturi.errors import ConfigError

# A billion tokens a second: no limit means more, and a century's refill stays finite.
MAX_PER_SECOND = 1_000_000_000


class Rate(msgspec.Struct, frozen=True):
    """At most ``per_second`` claims of a kind per second on average, with bursts of up
    to ``burst``. By default the bucket is local to each worker, so across W workers the
    kind's rate is up to W times this; ``shared=True`` keeps one bucket in the database
    for all workers (one more round trip per claim of the kind)."""

    per_second: float
    burst: int = 1
    # Shared by every worker through the database (a row per kind in rate_limits,
    # updated in the claim's transaction) instead of a bucket per worker.
    shared: bool = False

    def __post_init__(self) -> None:
        ps = self.per_second
        if (
            isinstance(ps, bool)
            or not isinstance(ps, int | float)
            or not ps > 0
            # (an int too large for a float is refused by the bound below, not here)
            or (isinstance(ps, float) and math.isinf(ps))
        ):
            raise ConfigError(
                f"rate per_second must be a positive number, got {validate.shown(ps)}"
            )
        # A token's wait (1 / per_second) becomes a group's wake-up time in the database:
        # at 1e-300 the grouped claim failed, "timestamp out of range", for good. A refill
        # is seconds idle times per_second, in float8: at 1e308 two idle seconds
        # overflowed it, and every claim of the kind failed.
        if ps < 1 / validate.MAX_SECONDS:
            raise ConfigError(
                f"rate per_second must be at least one token per 100 years "
                f"({1 / validate.MAX_SECONDS:.3g}), got {validate.shown(ps)}"
            )
        if ps > MAX_PER_SECOND:
            raise ConfigError(
                f"rate per_second must be at most {MAX_PER_SECOND:,}, got {validate.shown(ps)}"
            )
        validate.integer(self.burst, "rate burst")
        validate.boolean(self.shared, "rate shared")


class TokenBucket:
    """Tokens refill continuously at ``rate.per_second`` up to ``rate.burst``; a claim that
    returns jobs spends one token per job, a claim that returns nothing spends none."""

    __slots__ = ("_at", "rate", "tokens")

    def __init__(self, rate: Rate, now: float | None = None) -> None:
        self.rate = rate
        self.tokens = float(rate.burst)
        self._at = time.monotonic() if now is None else now

    def available(self, now: float | None = None) -> int:
        """Whole tokens available now."""
        t = time.monotonic() if now is None else now
        self.tokens = min(
            float(self.rate.burst), self.tokens + (t - self._at) * self.rate.per_second
        )
        self._at = t
        return int(self.tokens + 1e-9)

    def spend(self, n: int) -> None:
        self.tokens -= n

    def wait(self) -> float:
        """Seconds until the next whole token (0 when one is there)."""
        missing = 1.0 - self.tokens
        return max(0.0, missing / self.rate.per_second)
