"""A worker whose first statement meets a connection broken under it (the server restarted
between the pool's connect and the schema check) stops with the one-line ConnectError the
CLI prints, not with asyncpg's InternalClientError and a traceback (the chaos soak's
replacement workers met it during a restart)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

import venturi


class BrokenUnderneath:
    """A pool whose connection the server dropped: every statement fails as asyncpg's
    protocol does then."""

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        raise asyncpg.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        )

    fetch = fetchrow = execute = fetchval

    def acquire(self) -> Any:
        raise AssertionError("the worker must stop before it takes a connection")

    async def release(self, conn: Any) -> None:
        raise AssertionError("nothing was acquired")


async def test_a_broken_first_statement_is_a_one_line_connect_error(kinds: list[str]) -> None:
    @venturi.task(kind="start_broken")
    async def handler(ctx: venturi.Context[Any], carry: int) -> venturi.Outcome:
        return venturi.complete()

    worker = venturi.Worker(None, BrokenUnderneath(), [handler])
    with pytest.raises(venturi.ConnectError, match=r"^cannot connect: the first statement failed"):
        await worker.run(asyncio.Event())
