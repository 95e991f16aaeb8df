"""Tasks for the log-format tests (`venturi worker tests.support.logtasks`): one that logs
through ``ctx.log``, ones that fail with known exceptions (one of a message of lines)."""

from __future__ import annotations

from typing import Any

import venturi
from tests.support.carries import Item as Item  # re-exported: tests name logtasks.Item


@venturi.task(kind="log_talk")
async def talk(ctx: venturi.Context[Any], carry: Item) -> None:
    ctx.log.info("charging card %d", carry.n)


@venturi.task(kind="log_fail", max_failures=2)
async def fail(ctx: venturi.Context[Any], carry: Item) -> None:
    raise ValueError(f"card {carry.n} declined")


@venturi.task(kind="log_last_try", max_failures=1)
async def last_try(ctx: venturi.Context[Any], carry: Item) -> None:
    raise ValueError(f"card {carry.n} expired")


@venturi.task(kind="log_give_up")
async def give_up(ctx: venturi.Context[Any], carry: Item) -> venturi.Outcome:
    return venturi.dead(f"card {carry.n} is stolen")


@venturi.task(kind="log_retry_out", max_failures=1)
async def retry_out(ctx: venturi.Context[Any], carry: Item) -> venturi.Outcome:
    return venturi.retry(reason=f"card {carry.n} busy")


@venturi.task(kind="log_many_lines", max_failures=1)
async def many_lines(ctx: venturi.Context[Any], carry: Item) -> None:
    # pydantic's and asyncpg's messages span lines, the last indented.
    raise ValueError(f"1 validation error for Order {carry.n}\nquantity\n  Input should be > 0")
