"""A schedule whose cron expression or time zone changed starts over, as a new schedule:
with its next slot, not with the new expression's latest one (a slot hours before the
deploy)."""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec

import venturi
from venturi import Context, CronScheduler, admin, db
from venturi.runtime.worker import Worker
from venturi.tasks import Task, unregister


class Tick(msgspec.Struct):
    label: str = "tick"


def nightly(cron: str, tz: str | None = None) -> Task[Any]:
    """The task "c_edit" as a deploy declares it."""
    unregister("c_edit")

    @venturi.task(kind="c_edit", cron=cron, tz=tz)
    async def report(ctx: Context[Any], carry: Tick) -> None: ...

    return report


async def _row(pool: asyncpg.Pool) -> Any:
    [row] = await db.schedules.schedule_list(pool, schema="venturi", names=["c_edit"])
    return row


async def test_an_edited_cron_starts_over_with_its_next_slot(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    old = nightly("0 1 * * *")
    await CronScheduler().run(pool, Worker(None, pool, [old]))
    # It last ran a day before its latest slot (a day is behind: a slot of any daily
    # expression is due, were the row taken as the new expression's).
    await conn.execute(
        "UPDATE venturi.schedules SET last_slot = last_slot - interval '1 day'"
        " WHERE name = 'c_edit'"
    )
    for cron, tz in [("30 2 * * *", None), ("30 2 * * *", "Europe/Paris")]:
        new = nightly(cron, tz)
        assert new.cron is not None
        worker = Worker(None, pool, [new])
        await CronScheduler().run(pool, worker)
        assert await admin.list_jobs(conn, kind="c_edit") == []
        assert worker.stats["cron_enqueued"] == 0
        row = await _row(pool)
        assert row["last_slot"] == new.cron.latest(row["now"])
        await conn.execute(
            "UPDATE venturi.schedules SET last_slot = last_slot - interval '1 day'"
            " WHERE name = 'c_edit'"
        )
    # Unchanged, a day behind is downtime: one catch-up job.
    await CronScheduler().run(pool, Worker(None, pool, [new]))
    assert len(await admin.list_jobs(conn, kind="c_edit")) == 1


async def test_a_row_from_before_the_expression_was_kept_takes_it_on(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = nightly("0 * * * *")
    assert task.cron is not None
    await CronScheduler().run(pool, Worker(None, pool, [task]))
    # A row an older version wrote: no expression, and an hour behind.
    await conn.execute(
        "UPDATE venturi.schedules SET expression = NULL, tz = NULL,"
        " last_slot = last_slot - interval '1 hour' WHERE name = 'c_edit'"
    )
    worker = Worker(None, pool, [task])
    await CronScheduler().run(pool, worker)
    # Taken as the same schedule: the hour's slot runs, and the row now says what it is.
    [job] = await admin.list_jobs(conn, kind="c_edit")
    assert worker.stats["cron_enqueued"] == 1
    assert job.visible_at == task.cron.latest(job.created_at)
    row = await conn.fetchrow("SELECT expression, tz FROM venturi.schedules WHERE name = 'c_edit'")
    assert (row["expression"], row["tz"]) == ("0 * * * *", "UTC")
