"""Writes refused by the server's state (a full disk, a demoted primary, read-only mode):
the worker keeps each outcome and writes it once writes return, instead of taking the
refusal for a bad outcome (complete -> failed -> dead, then a re-run)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_stat, wait_status, wait_until
from tests.support import sql as test_sql
from venturi import Context, Worker


async def _all_sessions(conn: asyncpg.Connection, statement: str) -> None:
    # A database setting reaches new sessions only: end the worker's, it reconnects.
    await conn.execute(test_sql.statement(statement))
    await conn.fetchval(test_sql.statement("backends_terminate"))


async def test_a_completion_refused_by_read_only_mode_is_written_once_writes_return(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    runs: list[int] = []
    go = asyncio.Event()

    @venturi.task(kind="rw_refused")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        runs.append(ctx.job.attempt)
        await go.wait()

    job_id = await handler.enqueue(conn, Item(1))
    worker = Worker(None, dsn, [handler], concurrency=1, poll_max=0.2)
    async with running(worker):
        await wait_until(lambda: len(runs) == 1)
        await _all_sessions(conn, "database_read_only")
        go.set()  # the handler completes while every write is refused
        await wait_stat(worker, "db_errors", 3)
        await _all_sessions(conn, "database_read_write")

        await wait_status(conn, job_id, "completed", within=30)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.attempt == 1 and job.failures == 0
    assert runs == [1]  # ran once: the outcome was kept, not re-run
    events = [e.event for e in await venturi.get_journal(conn, job_id)]
    assert "failed" not in events and "dead" not in events and "released" not in events, events
