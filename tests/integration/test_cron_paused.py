"""A paused kind's schedule enqueues nothing while the kind is paused; at the resume its
slots are caught up as after downtime: each slot of a short pause, one catch-up job for a
long one (no pile of one job per slot)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

import venturi
from venturi import Context, CronScheduler, admin, db
from venturi.runtime.worker import Worker


class Tick(msgspec.Struct):
    label: str = "tick"


async def test_a_paused_kinds_slots_wait_for_the_resume_and_then_merge(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_paused", cron="* * * * * *")  # every second
    async def tick(ctx: Context[Any], carry: Tick) -> None: ...

    assert tick.cron is not None
    now = await conn.fetchval("SELECT now()")
    before = tick.cron.latest(now) - timedelta(seconds=3)
    await db.schedules.schedule_init(pool, schema="venturi", name="c_paused", slot=before)
    await admin.pause_kinds(conn, ["c_paused"], reason="test")
    worker = Worker(None, pool, [tick])
    scheduler = CronScheduler()
    await scheduler.run(pool, worker)
    assert await admin.list_jobs(conn, kind="c_paused") == []
    [row] = await db.schedules.schedule_list(pool, schema="venturi", names=["c_paused"])
    assert row["last_slot"] == before and worker.stats["cron_enqueued"] == 0
    # Paused for five minutes: at the resume, one catch-up job for them all.
    await conn.execute(
        "UPDATE venturi.schedules SET last_slot = last_slot - interval '5 minutes'"
        " WHERE name = 'c_paused'"
    )
    await admin.resume_kinds(conn, ["c_paused"])
    await scheduler.run(pool, worker)
    [job] = await admin.list_jobs(conn, kind="c_paused")
    assert worker.stats["cron_enqueued"] == 1 and worker.stats["cron_coalesced"] == 1
    assert job.visible_at >= tick.cron.latest(now)
