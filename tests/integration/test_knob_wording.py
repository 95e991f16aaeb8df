"""Errors that name what the user wrote: the knob's own name, the function that makes the
value, the rule that was broken (the docs probe found each naming something else)."""

from __future__ import annotations

from typing import Any

import pytest

import venturi
from venturi import ConfigError, Context, testing
from venturi.maintenance.cron import CronScheduler


@venturi.task(kind="kw_one")
async def one(ctx: Context[Any], carry: int) -> None:
    return None


def test_one_task_where_a_list_belongs_is_a_config_error(dsn: str) -> None:
    # A bare TypeError "'Task' object is not iterable" before.
    with pytest.raises(ConfigError, match=r"tasks must be a list of tasks, got one task"):
        venturi.Worker(None, dsn, one)  # type: ignore[arg-type]


async def test_drain_of_one_task_is_a_config_error(dsn: str) -> None:
    with pytest.raises(ConfigError, match=r"drain: tasks must be a list of tasks, got one task"):
        await testing.drain(dsn, one)  # type: ignore[arg-type]


def test_cron_names_the_function_that_makes_a_schedule() -> None:
    # venturi.Schedule does not exist: schedules are made by venturi.schedule(...).
    with pytest.raises(ConfigError, match=r"made by venturi\.schedule\(\.\.\.\), got 1"):
        CronScheduler(schedules=[1])  # type: ignore[list-item]


async def test_a_signal_name_with_a_control_character_says_so(dsn: str) -> None:
    with pytest.raises(ConfigError, match="without control characters"):
        await venturi.signal(dsn, 1, "approval\x01")


async def test_a_job_id_that_is_not_an_int_is_refused(dsn: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        job_id = await one.enqueue(conn, 1)
        # The driver read 1.5 as job 1: a wrong answer, not an error.
        for read in (venturi.get_job, venturi.get_journal, venturi.get_result):
            with pytest.raises(ConfigError, match=r"job_id must be an int, got 1\.5"):
                await read(conn, 1.5)  # type: ignore[arg-type]
            with pytest.raises(ConfigError, match="job_id must be an int, got '1'"):
                await read(conn, str(job_id))  # type: ignore[arg-type]
        assert await venturi.get_job(conn, 2**63) is None
        assert await venturi.get_journal(conn, 2**63) == []
        assert await venturi.get_result(conn, 2**63) is None
    finally:
        await conn.close()
