"""retry_on is checked when a task is declared."""

from __future__ import annotations

from typing import Any

import pytest

import venturi
from tests.support import Item
from venturi import ConfigError, Context


@pytest.mark.parametrize("bad", [(), ("ValueError",), (ValueError, 3), int, "x"])
def test_retry_on_is_checked_when_declared(bad: Any, kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="retry_on must be an exception class"):

        @venturi.task(kind="ro_bad", retry_on=bad)
        async def handler(ctx: Context[Any], carry: Item) -> None:
            return None
