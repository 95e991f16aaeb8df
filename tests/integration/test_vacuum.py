"""venturi.maintenance.Vacuum: the live table vacuumed once its dead row versions pass a
threshold, left alone below it, and left to autovacuum (said once) when the worker's role
does not own it."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_for, wait_stat
from tests.support.roles import not_owner_dsn
from tests.support.sql import statement as tsql
from venturi import Context
from venturi.errors import ConfigError
from venturi.maintenance import Vacuum
from venturi.runtime.worker import Worker


def _parked(kind: str) -> venturi.Task[Any]:
    # Registered with no worker serving it: its jobs stay pending for the test to touch.
    @venturi.task(kind=kind)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def _dead_rows(conn: asyncpg.Connection, kind: str, n: int) -> int:
    """Enqueue ``n`` jobs and leave a dead row version behind each; the dead count."""
    task = _parked(kind)
    await venturi.enqueue_many(conn, [task.job(Item(i)) for i in range(n)])
    await conn.execute(tsql("jobs_touch"))
    stats = await conn.fetchrow(tsql("jobs_vacuum_stats"))
    assert stats["dead"] >= n
    return int(stats["vacuum_count"])


async def test_the_live_table_is_vacuumed_past_the_threshold_and_not_below(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    before = await _dead_rows(conn, "vac_parked", 300)
    # Below its threshold: the task runs and leaves the table alone.
    other = [_parked("vac_other")]  # the worker serves another kind
    idle = Worker(None, dsn, other, poll_max=0.1, maintenance=[Vacuum(interval=0.05, dead=10**6)])
    async with running(idle):
        await wait_stat(idle, "maintenance_runs:vacuum", 3)
    assert idle.stats["vacuum_runs"] == 0
    assert (await conn.fetchrow(tsql("jobs_vacuum_stats")))["vacuum_count"] == before
    # Past it: it vacuums until the count it reads is below the threshold, then leaves
    # the table alone. Usually one vacuum does it; on a busy server a vacuum may leave
    # some dead versions behind for the next (a page another backend had pinned), so the
    # test waits for the count, not for exactly one run.
    busy = Worker(None, dsn, other, poll_max=0.1, maintenance=[Vacuum(interval=0.05, dead=100)])

    async def below() -> bool:
        return int((await conn.fetchrow(tsql("jobs_vacuum_stats")))["dead"]) < 100

    async with running(busy):
        await wait_stat(busy, "vacuum_runs", 1)
        await wait_for(below)
        # The pass under way may have read the count before it fell: let it end.
        await wait_stat(busy, "maintenance_runs:vacuum", busy.stats["maintenance_runs:vacuum"] + 1)
        runs = busy.stats["vacuum_runs"]
        # Below the threshold: three more passes, no more vacuums.
        await wait_stat(busy, "maintenance_runs:vacuum", busy.stats["maintenance_runs:vacuum"] + 3)
        assert busy.stats["vacuum_runs"] == runs
    stats = await conn.fetchrow(tsql("jobs_vacuum_stats"))
    assert stats["vacuum_count"] == before + runs
    assert stats["dead"] < 100


async def test_a_role_that_does_not_own_the_table_leaves_it_to_autovacuum(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    before = await _dead_rows(conn, "vac_not_owner", 300)
    as_other = await not_owner_dsn(conn, dsn)
    task = Vacuum(interval=0.05, dead=100)
    worker = Worker(None, as_other, [_parked("vac_other")], poll_max=0.1, maintenance=[task])
    with caplog.at_level(logging.WARNING, logger="venturi.vacuum"):
        async with running(worker):
            await wait_stat(worker, "maintenance_runs:vacuum", 3)
    assert task.allowed is False
    assert worker.stats["vacuum_runs"] == 0
    said = [r.getMessage() for r in caplog.records if r.name == "venturi.vacuum"]
    assert said == [
        "vacuum: this role does not own venturi.jobs and cannot vacuum it; autovacuum alone "
        "keeps it (see docs/maintenance.md)"
    ]
    assert (await conn.fetchrow(tsql("jobs_vacuum_stats")))["vacuum_count"] == before


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"interval": 0}, "vacuum interval must be positive, got 0"),
        ({"dead": 0}, "vacuum dead must be an integer >= 1, got 0"),
        ({"dead": 1.5}, "vacuum dead must be an integer >= 1, got 1.5"),
    ],
)
def test_vacuum_knobs_are_checked(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Vacuum(**knobs)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_vacuum_spends_at_most_a_tenth_of_its_time_vacuuming() -> None:
    task = Vacuum(interval=5)
    # A short vacuum: the next may start at the runner's next call (5 s later).
    assert task.next_start(100.0, 0.2) == 102.0
    # A long one (a table vacuum cannot clean while an old transaction holds it): the
    # next waits ten times as long.
    assert task.next_start(100.0, 3.0) == 130.0
