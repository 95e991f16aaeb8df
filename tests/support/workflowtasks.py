"""Workflow tasks for tests that run `venturi worker tests.support.workflowtasks` in a
subprocess and kill it (SIGKILL) after a step was recorded.

The side effects go to the test database's table ``effects`` (created by the test):
``effect`` writes one row outside any transaction each time it runs (at least once);
``reserve`` writes one row inside its transactional step (exactly once). After both
steps the first attempt hangs until its process is killed; a later attempt completes.
"""

from __future__ import annotations

import os
from typing import Any

import asyncpg

import venturi
from tests.support.carries import Item
from tests.support.waits import until_cancelled


async def effect(job_id: int) -> int:
    conn = await asyncpg.connect(os.environ["VENTURI_DSN"])
    try:
        await conn.execute("INSERT INTO effects (job_id, what) VALUES ($1, 'step')", job_id)
    finally:
        await conn.close()
    return job_id


async def reserve(conn: asyncpg.Connection, job_id: int) -> int:
    await conn.execute("INSERT INTO effects (job_id, what) VALUES ($1, 'tx')", job_id)
    return job_id


@venturi.task(kind="proc_workflow", backoff=venturi.Backoff.fixed(0.01))
async def workflow(ctx: venturi.Context[Any], carry: Item) -> None:
    await ctx.step("effect", effect, ctx.job.id)
    await ctx.step("reserve", reserve, ctx.job.id, transactional=True)
    if ctx.job.attempt == 1:
        await until_cancelled()  # killed here, both steps recorded
