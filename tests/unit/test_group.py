"""WorkerGroup's knobs, and Pool, its deprecated alias."""

from __future__ import annotations

import pytest

import venturi
from tests.support.carries import noop_task
from venturi import ConfigError, WorkerGroup
from venturi.runtime.worker import Worker


def test_bad_pool(kinds: list[str]) -> None:
    a = noop_task("pool_a")
    w = Worker(None, "postgresql://x", [a])
    # Named by its knob, workers (it said "pool:", the class's first name).
    with pytest.raises(ConfigError, match=r"^WorkerGroup: workers must hold at least one"):
        WorkerGroup([])
    with pytest.raises(ConfigError, match=r"^WorkerGroup: workers must be venturi\.Worker"):
        WorkerGroup([object()])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="twice"):
        WorkerGroup([w, w])
    with pytest.raises(ConfigError, match="restart_delay"):
        WorkerGroup([w], restart_delay=-1)
    own = Worker(None, "postgresql://x", [a], claimed_by="api-1")
    WorkerGroup([own, Worker(None, "postgresql://x", [a], claimed_by="api-2")])
    assert own.claimed_by == "api-1"  # distinct identities are left alone


def test_pool_is_a_deprecated_alias_of_worker_group() -> None:
    # venturi.Pool clashed with asyncpg's Pool; the old name keeps working, with a warning.
    with pytest.warns(DeprecationWarning, match="venturi.WorkerGroup"):
        alias = venturi.Pool  # type: ignore[attr-defined]  # outside __all__: deprecated
    assert alias is WorkerGroup
