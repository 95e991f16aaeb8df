"""Property: a carry that encodes comes back equal after a round trip through the jobs
table's jsonb column."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import asyncpg
from hypothesis import HealthCheck, example, given, settings

import venturi
from tests.support.strategies import CARRY, Carry, Inner
from venturi import db, sql


async def test_round_trip_through_jsonb(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """What a worker decodes is what was enqueued: the carry goes into jsonb (which
    reorders keys and rewrites numbers) and comes back out as the claim reads it."""

    @venturi.task(kind="prop_db")
    async def handler(ctx: venturi.Context[Any], carry: Carry) -> None:
        return None

    loop = asyncio.get_running_loop()

    def through_db(carry: Carry) -> Carry:
        async def go() -> str:
            job_id = await handler.enqueue(conn, carry)
            row = await db.reads.job_get(conn, schema=sql.DEFAULT_SCHEMA, job_id=job_id)
            assert row is not None
            return str(row["carry"])

        stored = asyncio.run_coroutine_threadsafe(go(), loop).result(30)
        return handler.codec.decode(stored)

    @given(CARRY)
    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @example(
        Carry("", 2**64 - 1, 1.7976931348623157e308, True, [], {}, Inner("", [], 5e-324),
              None, [], (0, ""), b"", datetime(1, 1, 1, tzinfo=UTC), "fast")
    )  # fmt: skip
    def prop(carry: Carry) -> None:
        assert through_db(carry) == carry

    # Hypothesis drives the examples from a thread; the database calls run on this loop.
    await asyncio.to_thread(prop)
    rows = await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA)
    assert sum(r["jobs"] for r in rows) >= 100  # the examples really went through
