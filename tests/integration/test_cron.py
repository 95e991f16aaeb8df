"""Recurring jobs: cron expressions in a time zone, each slot enqueued exactly once by
however many workers, finished slots never again, missed slots coalesced."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import Item as Needs
from tests.support import running, wait_for, wait_status
from venturi import ConfigError, Context, CronScheduler, admin, db
from venturi.maintenance import cron
from venturi.runtime.worker import Worker


class Tick(msgspec.Struct):
    label: str = "tick"


@pytest.fixture
def schedules() -> Iterator[None]:
    """Schedules a test declares with venturi.schedule: forgotten after the test."""
    before = set(cron.declared())
    yield
    for name in set(cron.declared()) - before:
        cron.unschedule(name)


# --- expressions ---------------------------------------------------------------------


# --- the scheduler against the database ----------------------------------------------


async def _jobs(conn: Any, kind: str) -> list[admin.JobRow]:
    return await admin.list_jobs(conn, kind=kind, limit=500)


async def test_first_sight_starts_with_the_next_slot(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_first", cron="0 0 1 1 *")
    async def yearly(ctx: Context[Any], carry: Tick) -> None: ...

    assert yearly.cron is not None
    worker = Worker(None, pool, [yearly])
    await CronScheduler().run(pool, worker)
    assert await _jobs(conn, "c_first") == []
    [row] = await db.schedules.schedule_list(pool, schema="venturi", names=["c_first"])
    assert row["last_slot"] == yearly.cron.latest(row["now"])
    assert worker.stats["cron_enqueued"] == 0


async def test_a_slot_is_enqueued_once_by_many_workers_and_never_again_once_finished(
    dsn: str, pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="c_once", cron="0 0 1 1 *")
    async def yearly(ctx: Context[Any], carry: Tick) -> venturi.Outcome:
        return venturi.complete(carry.label)

    assert yearly.cron is not None
    due = yearly.cron.latest(datetime.now(UTC))
    # The schedule last ran the year before: this year's slot is due.
    await db.schedules.schedule_init(
        pool, schema="venturi", name="c_once", slot=yearly.cron.latest(due - timedelta(1))
    )
    workers = [Worker(None, pool, [yearly]) for _ in range(8)]
    await asyncio.gather(*(CronScheduler().run(pool, w) for w in workers))
    [job] = await _jobs(conn, "c_once")
    assert sum(w.stats["cron_enqueued"] for w in workers) == 1
    assert job.key == f"cron:c_once:{due.isoformat()}"
    assert job.visible_at == due and job.status == "pending"

    runner = Worker(None, pool, [yearly], poll_max=0.1)
    async with running(runner):
        await wait_status(conn, job.id, "completed")
    assert await venturi.get_result(conn, job.id) == "tick"
    # The key no longer guards a finished job; the schedule's row still does.
    fresh = [Worker(None, pool, [yearly]) for _ in range(8)]
    await asyncio.gather(*(CronScheduler().run(pool, w) for w in fresh))
    assert [j.id for j in await _jobs(conn, "c_once")] == [job.id]


async def test_missed_slots_coalesce_into_one_catch_up_run(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str], schedules: None
) -> None:
    @venturi.task(kind="c_catchup")
    async def report(ctx: Context[Any], carry: Needs) -> None: ...

    hourly = venturi.schedule(report, "0 * * * *", Needs(7), name="reports")
    now = datetime.now(UTC)
    # Down for five hours: five slots were missed.
    await db.schedules.schedule_init(
        pool, schema="venturi", name="reports", slot=hourly.spec.latest(now) - timedelta(hours=5)
    )
    worker = Worker(None, pool, [report])
    scheduler = CronScheduler()
    await scheduler.run(pool, worker)
    [job] = await _jobs(conn, "c_catchup")
    assert worker.stats["cron_enqueued"] == 1 and worker.stats["cron_coalesced"] == 1
    assert job.key == f"cron:reports:{job.visible_at.isoformat()}"
    assert job.visible_at >= hourly.spec.latest(now)
    stored = await venturi.get_job(conn, job.id)
    assert stored is not None and stored.carry == {"n": 7}
    # Caught up: the next pass has nothing to do.
    await CronScheduler().run(pool, worker)
    assert len(await _jobs(conn, "c_catchup")) == 1


async def test_explicit_schedules_and_duplicate_names(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str], schedules: None
) -> None:
    @venturi.task(kind="c_explicit", cron="0 * * * *")
    async def task(ctx: Context[Any], carry: Tick) -> None: ...

    with pytest.raises(ConfigError, match="the name of task 'c_explicit''s own cron="):
        venturi.schedule(task, "30 * * * *", Tick("half past"), name="c_explicit")
    half = venturi.schedule(task, "30 * * * *", Tick("half past"), name="c_explicit_half")
    worker = Worker(None, pool, [task])
    # Given explicitly, only those schedules run.
    await CronScheduler([half]).run(pool, worker)
    rows = await db.schedules.schedule_list(
        pool, schema="venturi", names=["c_explicit", "c_explicit_half"]
    )
    by_name = {r["name"]: r for r in rows}
    assert by_name["c_explicit"]["last_slot"] is None
    assert by_name["c_explicit_half"]["last_slot"] == half.spec.latest(rows[0]["now"])
    with pytest.raises(ConfigError, match="share a name"):
        CronScheduler([half, half])
    with pytest.raises(ConfigError, match="cron interval"):
        CronScheduler(interval=0)


async def test_running_workers_enqueue_every_slot_exactly_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    ran: list[int] = []

    @venturi.task(kind="c_live", cron="* * * * * *")  # every second
    async def tick(ctx: Context[Any], carry: Tick) -> None:
        ran.append(ctx.job.id)

    workers = [
        Worker(None, dsn, [tick], poll_max=0.1, maintenance=[CronScheduler(interval=0.02)])
        for _ in range(3)
    ]
    async with running(workers[0]), running(workers[1]), running(workers[2]):
        await wait_for(lambda: _at_least(ran, 3))
    jobs = sorted(await _jobs(conn, "c_live"), key=lambda j: j.visible_at)
    slots = [j.visible_at for j in jobs]
    assert len(set(slots)) == len(slots) == len({j.key for j in jobs})
    # Consecutive seconds, none skipped, none twice, whichever worker enqueued them.
    assert slots == [slots[0] + timedelta(seconds=i) for i in range(len(slots))]
    assert sum(w.stats["cron_enqueued"] for w in workers) == len(jobs)
    assert len(ran) == len(set(ran))


async def _at_least(items: list[int], n: int) -> bool:
    return len(items) >= n
