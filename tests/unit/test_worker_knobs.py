"""Worker's knobs name themselves when they are bad."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import venturi
from tests.support import Item as N
from venturi import ConfigError, Context
from venturi.runtime.worker import Worker


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": -1}, "concurrency"),
        ({"concurrency": 2.5}, "concurrency"),
        ({"poll_max": 0}, "poll_max"),
        ({"poll_max": -1}, "poll_max"),
        ({"lease": 0}, "lease"),
        ({"lease": timedelta(seconds=-1)}, "lease"),
        ({"shutdown_timeout": -1}, "shutdown_timeout"),
        ({"priority_ratio": 1}, "priority_ratio"),
        ({"priority_ratio": 0}, "priority_ratio"),
        ({"claimed_by": ""}, "claimed_by"),
        ({"failures_to_dead": "yes"}, "failures_to_dead"),
        ({"schema": "Bad"}, "schema"),
        ({"backoff": 3}, "backoff"),
    ],
)
def test_bad_worker_knobs_name_themselves(kwargs: dict[str, Any], knob: str) -> None:
    with pytest.raises(ConfigError, match=knob):
        Worker(None, "postgresql://x", **kwargs)


def test_bad_cap_and_task(kinds: list[str]) -> None:
    @venturi.task(kind="w_cfg")
    async def handler(ctx: Context[Any], carry: N) -> None:
        return None

    with pytest.raises(ConfigError, match="cap"):
        Worker(None, "postgresql://x").register(handler, cap=0)
    with pytest.raises(ConfigError, match=r"@venturi\.task"):
        Worker(None, "postgresql://x").register(lambda c, x: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="pool_or_dsn"):
        Worker(None, 42)
