"""A worker's maintenance tasks and their intervals are checked when set."""

from __future__ import annotations

from typing import Any

import pytest

from venturi import ConfigError
from venturi.runtime.worker import Worker


@pytest.mark.parametrize("bad", [object(), "cleanup"])
def test_bad_maintenance_task(bad: Any) -> None:
    with pytest.raises(ConfigError, match="maintenance"):
        Worker(None, "postgresql://x", maintenance=[bad])


def test_bad_maintenance_interval() -> None:
    class Zero:
        name = "zero"
        interval = 0

        async def run(self, pool: Any, worker: Any) -> None:
            return None

    with pytest.raises(ConfigError, match="interval must be positive"):
        Worker(None, "postgresql://x", maintenance=[Zero()])  # type: ignore[list-item]  # bad on purpose
