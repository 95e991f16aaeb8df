"""Worker's defaults, and its knobs naming themselves when they are bad."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import pytest

import venturi
from tests.support import Item as N
from venturi import ConfigError, Context
from venturi.runtime.worker import Worker, default_concurrency


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


def test_default_concurrency_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    # Half the cores, at least 1 and at most 8 (an unknown count counts as one core).
    for cores, expected in [(None, 1), (1, 1), (2, 1), (3, 1), (4, 2), (15, 7), (16, 8), (64, 8)]:
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert default_concurrency() == expected, cores
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    w = Worker(None, "postgresql://x")
    assert w.concurrency == 3
    assert w.claimed_by == f"{socket.gethostname()}:{os.getpid()}"
    assert (w.poll_max, w.lease, w.shutdown_timeout, w.priority_ratio) == (30.0, 900.0, 30.0, 4)
