"""One schedule's failure in a cron pass costs that schedule only: the others of the
worker still enqueue their slots, and the log names the one that failed."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from venturi import Context, CronScheduler, admin, db
from venturi.cronspec import CronSpec
from venturi.runtime.worker import Worker
from venturi.schedules import Schedule


class Tick(msgspec.Struct):
    label: str = "tick"


class Broken(Schedule):
    """A schedule whose job cannot be built: its enqueue fails in every pass."""

    __slots__ = ()

    def key(self, slot: datetime) -> str:
        raise RuntimeError("no key for you")


async def test_one_failing_schedule_does_not_stop_the_others(
    pool: asyncpg.Pool,
    conn: asyncpg.Connection,
    kinds: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    @venturi.task(kind="c_iso")
    async def task(ctx: Context[Any], carry: Tick) -> None: ...

    assert task.cron is None
    bad = Broken("c_iso_bad", task, CronSpec("0 * * * *"), Tick("bad"))
    good = Schedule("c_iso_good", task, CronSpec("0 * * * *"), Tick("good"))
    now = await conn.fetchval("SELECT now()")
    for s in (bad, good):  # both last ran an hour's slot ago: one slot is due
        await db.schedules.schedule_init(
            pool, schema="venturi", name=s.name, slot=s.spec.latest(now) - timedelta(hours=1)
        )
    worker = Worker(None, pool, [task])
    with caplog.at_level(logging.WARNING, logger="venturi.cron"):
        await CronScheduler([bad, good]).run(pool, worker)
    [job] = await admin.list_jobs(conn, kind="c_iso")
    assert job.key is not None and job.key.startswith("cron:c_iso_good:")
    assert worker.stats["cron_enqueued"] == 1 and worker.stats["cron_failed"] == 1
    [said] = [r.getMessage() for r in caplog.records]
    assert "'c_iso_bad'" in said and "no key for you" in said
