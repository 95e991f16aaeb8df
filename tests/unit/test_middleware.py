"""Middleware is checked when it is set."""

from __future__ import annotations

from typing import Any

import pytest

from venturi import ConfigError
from venturi.runtime.worker import Worker


def test_middleware_is_checked_when_set() -> None:
    def not_async(ctx: Any, carry: Any, call_next: Any) -> Any:
        return None

    for bad in (not_async, 3, "mw"):
        with pytest.raises(ConfigError, match=r"middleware\[0\] must be an async def"):
            Worker(None, "postgresql://x", middleware=[bad])  # type: ignore[list-item]  # bad on purpose

    class Callable:
        async def __call__(self, ctx: Any, carry: Any, call_next: Any) -> Any:
            return await call_next()

    assert len(Worker(None, "postgresql://x", middleware=[Callable()]).middleware) == 1
