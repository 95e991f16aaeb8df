"""The worker's options checked when set: rates (and the token bucket), caps, metrics port."""

from __future__ import annotations

from typing import Any

import pytest

import venturi
from venturi import ConfigError
from venturi.rate import Rate, TokenBucket
from venturi.runtime.worker import Worker


def test_token_bucket() -> None:
    bucket = TokenBucket(Rate(per_second=10, burst=3), now=0.0)
    assert bucket.available(0.0) == 3
    bucket.spend(3)
    assert bucket.available(0.0) == 0
    assert bucket.wait() == pytest.approx(0.1)
    assert bucket.available(0.05) == 0
    assert bucket.available(0.1) == 1
    assert bucket.available(100.0) == 3  # never above the burst


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"per_second": 0}, "per_second"),
        ({"per_second": -1}, "per_second"),
        ({"per_second": 1, "burst": 0}, "burst"),
        ({"per_second": "fast"}, "per_second"),
    ],
)
def test_bad_rates(kwargs: dict[str, Any], knob: str) -> None:
    with pytest.raises(ConfigError, match=knob):
        Rate(**kwargs)


def test_bad_option_knobs(kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="heartbeat"):
        Worker(None, "postgresql://x", heartbeat=0)
    with pytest.raises(ConfigError, match="renew_lease"):
        Worker(None, "postgresql://x", renew_lease="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="rate"):
        venturi.task(kind="o_bad", rate=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="renew_lease"):
        venturi.task(kind="o_bad", renew_lease=1)  # type: ignore[arg-type]


def test_bad_metrics_port() -> None:
    with pytest.raises(ConfigError, match="metrics_port"):
        Worker(None, "postgresql://x", metrics_port=70000)


def test_rate_shared_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="shared"):
        Rate(per_second=1, shared="yes")  # type: ignore[arg-type]
