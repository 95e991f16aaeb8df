"""Retry delays (venturi.backoff): exponential up to the cap, half-jitter within [d/2, d],
a fixed delay, and the knobs checked when the policy is built."""

from __future__ import annotations

from datetime import timedelta

import pytest

from venturi import Backoff, ConfigError


def test_the_delay_grows_by_the_factor_up_to_the_cap() -> None:
    b = Backoff.exponential(base=1.5, factor=2, cap=10, jitter=False)
    assert [b.delay(n) for n in range(1, 6)] == [1.5, 3.0, 6.0, 10.0, 10.0]
    assert b.delay(0) == 1.5  # the first failure however it is counted
    assert b.delay(10_000) == 10.0  # past float range: the cap, not an overflow


def test_jitter_draws_from_the_upper_half() -> None:
    b = Backoff.exponential(base=4, factor=1, cap=4, jitter=True)
    drawn = [b.delay(1) for _ in range(500)]
    assert all(2.0 <= d <= 4.0 for d in drawn)
    assert len(set(drawn)) > 1


def test_a_fixed_delay_is_the_same_every_time() -> None:
    b = Backoff.fixed(timedelta(seconds=7))
    assert {b.delay(n) for n in range(1, 20)} == {7.0}
    assert Backoff.fixed(0).delay(3) == 0.0


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"base": 0}, "backoff base"),
        ({"cap": -1}, "backoff cap"),
        ({"factor": 0.5}, "factor"),
        ({"factor": True}, "factor"),
        ({"base": 10, "cap": 5}, "must not be below its base"),
    ],
)
def test_bad_knobs_are_refused_when_built(knobs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Backoff.exponential(**knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize("jitter", [0, 1, "no", None])
def test_a_jitter_that_is_not_a_bool_is_refused_when_built(jitter: object) -> None:
    # Stored as a boolean: jitter=0 was accepted here, then every enqueue of the task
    # failed with the driver's DataError.
    with pytest.raises(ConfigError, match=r"^backoff jitter must be True or False, got "):
        Backoff(base=1.0, jitter=jitter)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="backoff jitter"):
        Backoff.exponential(1.0, jitter=jitter)  # type: ignore[arg-type]
