"""A rolling deploy that edits a schedule's cron: workers of the old definition and of the
new one check it side by side. The newer deploy's definition runs it, and the older
workers defer to it (each resetting the row to its own latest slot, in turn, ran none of
its slots while both ran); workers started later (a rollback) win in turn."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

import venturi
from venturi import Context, CronScheduler, admin, db
from venturi.cronspec import CronSpec
from venturi.runtime.worker import Worker
from venturi.schedules import Schedule
from venturi.tasks import Task


class Tick(msgspec.Struct):
    label: str = "tick"


OLD, NEW = "0 * * * *", "30 * * * *"


def _task() -> Task[Any]:
    @venturi.task(kind="c_roll")
    async def roll(ctx: Context[Any], carry: Tick) -> None: ...

    return roll


def _deploy(pool: asyncpg.Pool, task: Task[Any], cron: str) -> tuple[CronScheduler, Worker[None]]:
    """A worker of a deploy whose schedule "c_roll" is ``cron``."""
    schedule = Schedule("c_roll", task, CronSpec(cron), Tick())
    return CronScheduler([schedule]), Worker(None, pool, [task])


async def _row(conn: asyncpg.Connection) -> Any:
    return await conn.fetchrow(
        "SELECT last_slot, expression, defined_at FROM venturi.schedules WHERE name = 'c_roll'"
    )


async def _an_hour_passes(conn: asyncpg.Connection, hours: int = 1) -> None:
    await conn.execute(
        "UPDATE venturi.schedules SET last_slot = last_slot - make_interval(hours => $1)"
        " WHERE name = 'c_roll'",
        hours,
    )


async def test_the_newer_deploys_definition_runs_and_the_older_defers(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str], caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="venturi.cron")
    task = _task()
    old_cron, old_worker = _deploy(pool, task, OLD)
    await old_cron.run(pool, old_worker)  # the old deploy, running before the new one
    new_cron, new_worker = _deploy(pool, task, NEW)
    await new_cron.run(pool, new_worker)  # the new deploy starts the schedule over
    redefined = await _row(conn)
    assert redefined["expression"] == NEW
    old_cron._next_due = 0.0  # the old definition's next slot has come
    for _ in range(3):
        await old_cron.run(pool, old_worker)
        assert await _row(conn) == redefined  # neither redefined nor advanced
    # A slot comes: the new definition's runs, and the old one keeps deferring.
    await _an_hour_passes(conn)
    new_cron._next_due = 0.0
    await new_cron.run(pool, new_worker)
    for _ in range(3):
        await old_cron.run(pool, old_worker)
    [job] = await admin.list_jobs(conn, kind="c_roll")
    assert job.visible_at.minute == 30
    assert old_worker.stats["cron_enqueued"] == 0
    assert new_worker.stats["cron_enqueued"] == 1
    said = [r.getMessage() for r in caplog.records if "newer definition" in r.getMessage()]
    assert len(said) == 1, said  # said once, not at every check

    # A rollback (workers started later, of the old definition) wins in turn; the old
    # deploy's remaining workers, checking at each pass while they deferred, run with it.
    back_cron, back_worker = _deploy(pool, task, OLD)
    await back_cron.run(pool, back_worker)
    assert (await _row(conn))["expression"] == OLD
    await _an_hour_passes(conn)
    await old_cron.run(pool, old_worker)
    assert old_worker.stats["cron_enqueued"] == 1
    new_cron._next_due = 0.0
    await new_cron.run(pool, new_worker)
    assert (await _row(conn))["expression"] == OLD
    assert new_worker.stats["cron_enqueued"] == 1


async def test_a_definition_whose_workers_are_gone_is_taken_over(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str], caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="venturi.cron")
    task = _task()
    old_cron, old_worker = _deploy(pool, task, OLD)
    await old_cron.run(pool, old_worker)
    new_cron, new_worker = _deploy(pool, task, NEW)
    await new_cron.run(pool, new_worker)
    # Its slot is more than a minute overdue and no worker of it ran it (they are gone,
    # say an old worker restarted during the deploy, then left): the older one takes over.
    # Two hours back, not one: one hour back, the overdue slot is the latest :30, which is
    # less than a minute old when the test runs in the minute after a half hour (it failed
    # so once, in .ci/run at 01:30).
    await _an_hour_passes(conn, hours=2)
    await admin.pause_kinds(conn, ["c_roll"])
    old_cron._next_due = 0.0
    await old_cron.run(pool, old_worker)
    assert (await _row(conn))["expression"] == NEW  # a paused kind's slots wait: none overdue
    await admin.resume_kinds(conn, ["c_roll"])
    await old_cron.run(pool, old_worker)
    row = await _row(conn)
    assert row["expression"] == OLD
    assert row["last_slot"] == CronSpec(OLD).latest(row["defined_at"])
    assert await admin.list_jobs(conn, kind="c_roll") == []
    assert any("takes over" in r.getMessage() for r in caplog.records)


async def test_a_redefinition_defers_to_one_written_after_its_start(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    now = await conn.fetchval("SELECT now()")
    spec = CronSpec(OLD)
    await db.schedules.schedule_init(
        pool, schema="venturi", name="c_race", slot=spec.latest(now), expression=OLD, tz="UTC"
    )
    kept = await conn.fetchrow("SELECT * FROM venturi.schedules WHERE name = 'c_race'")
    assert kept["defined_at"] is not None
    # A worker started before that definition was written leaves it as it is.
    before = await db.schedules.schedule_redefine(
        pool,
        schema="venturi",
        name="c_race",
        slot=spec.latest(now),
        expression=NEW,
        tz="UTC",
        started=kept["defined_at"] - timedelta(microseconds=1),
    )
    assert before is None
    assert await conn.fetchrow("SELECT * FROM venturi.schedules WHERE name = 'c_race'") == kept
