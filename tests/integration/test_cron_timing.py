"""Cron's timing: its check runs on its own task, so no other maintenance delays it; and
a short gap (the worker was late) enqueues each missed slot, while downtime merges them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

import venturi
from tests.support import running, wait_for
from venturi import Context, CronScheduler, admin, db
from venturi.runtime.worker import Worker


class Tick(msgspec.Struct):
    label: str = "tick"


class Stuck:
    """A maintenance task whose run never ends (an alert hook that hangs, a pass over a
    big table): it holds the maintenance loop from its first run on."""

    name = "stuck"
    interval = 0.01

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, pool: Any, worker: Any) -> None:
        self.started.set()
        await self.release.wait()


async def test_a_stuck_maintenance_task_does_not_hold_up_cron(
    dsn: str, pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_stuck", cron="0 * * * *")
    async def hourly(ctx: Context[Any], carry: Tick) -> None: ...

    assert hourly.cron is not None
    now = await conn.fetchval("SELECT now()")
    # The last run was an hour's slot ago: this hour's slot is due at the first check.
    await db.schedules.schedule_init(
        pool, schema="venturi", name="c_stuck", slot=hourly.cron.latest(now) - timedelta(hours=1)
    )
    stuck = Stuck()
    worker = Worker(None, dsn, [hourly], maintenance=[stuck, CronScheduler(interval=0.01)])

    async def enqueued() -> bool:
        return len(await admin.list_jobs(conn, kind="c_stuck")) == 1

    try:
        async with running(worker):
            await stuck.started.wait()
            await wait_for(enqueued)
            assert not stuck.release.is_set()
    finally:
        stuck.release.set()


async def test_a_slot_another_worker_is_enqueueing_is_no_catch_up(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_race", cron="0 * * * *")
    async def hourly(ctx: Context[Any], carry: Tick) -> None: ...

    assert hourly.cron is not None
    latest = hourly.cron.latest(await conn.fetchval("SELECT now()"))
    hour = timedelta(hours=1)
    await db.schedules.schedule_init(pool, schema="venturi", name="c_race", slot=latest - 2 * hour)
    # Another worker is enqueueing the slot an hour ago: its transaction holds the row.
    other = conn.transaction()
    await other.start()
    assert await db.schedules.schedule_advance_if_behind(
        conn, schema="venturi", name="c_race", slot=latest - hour
    )
    worker = Worker(None, pool, [hourly])
    run = asyncio.ensure_future(CronScheduler().run(pool, worker))

    async def waits_on_the_row() -> bool:
        return bool(
            await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )

    await wait_for(waits_on_the_row)
    await other.commit()
    await run
    # It enqueued the slot after the other's: the next one, no slot missed.
    assert worker.stats["cron_enqueued"] == 1 and worker.stats["cron_coalesced"] == 0


async def test_a_short_gap_enqueues_each_missed_slot_and_downtime_merges_them(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_late", cron="* * * * * *")  # every second
    async def tick(ctx: Context[Any], carry: Tick) -> None: ...

    assert tick.cron is not None
    second = timedelta(seconds=1)
    previous = tick.cron.latest(await conn.fetchval("SELECT now()")) - 5 * second
    # The check was five seconds late (a busy worker): each slot runs, as if on time.
    await db.schedules.schedule_init(pool, schema="venturi", name="c_late", slot=previous)
    worker = Worker(None, pool, [tick])
    await CronScheduler().run(pool, worker)
    slots = sorted(j.visible_at for j in await admin.list_jobs(conn, kind="c_late"))
    assert len(slots) >= 5
    assert slots == [previous + (i + 1) * second for i in range(len(slots))]
    assert worker.stats["cron_enqueued"] == len(slots) and worker.stats["cron_coalesced"] == 0

    @venturi.task(kind="c_down", cron="* * * * * *")
    async def down(ctx: Context[Any], carry: Tick) -> None: ...

    assert down.cron is not None
    # No worker for five minutes: one catch-up job for the latest slot.
    latest = down.cron.latest(await conn.fetchval("SELECT now()"))
    await db.schedules.schedule_init(
        pool, schema="venturi", name="c_down", slot=latest - timedelta(minutes=5)
    )
    other = Worker(None, pool, [down])
    await CronScheduler().run(pool, other)
    [job] = await admin.list_jobs(conn, kind="c_down")
    assert job.visible_at >= latest
    assert other.stats["cron_enqueued"] == 1 and other.stats["cron_coalesced"] == 1
