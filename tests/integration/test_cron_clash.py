"""Two schedules of one name (a task's own cron and a venturi.schedule declared before
the task): the worker refuses them in one line, not a traceback every second."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import venturi_cli
from tests.support.cli import ROOT
from venturi import Context, CronScheduler, admin, db
from venturi.runtime.worker import Worker
from venturi.schedules import declared, unschedule

UNREACHABLE = "postgresql://me@127.0.0.1:1/db"

# The schedule is declared first, so its declaration cannot see the task's own.
CLASH = """
import venturi

@venturi.task("other")
async def other(ctx, carry: None) -> None: ...

venturi.schedule(other, "30 * * * *", name="late")

@venturi.task("late", cron="0 * * * *")
async def late(ctx, carry: None) -> None: ...
"""


class Tick(msgspec.Struct):
    label: str = "tick"


@pytest.fixture
def schedules() -> Iterator[None]:
    before = set(declared())
    yield
    for name in set(declared()) - before:
        unschedule(name)


async def test_a_clash_skips_the_clashing_schedules_only_and_says_so_once(
    pool: asyncpg.Pool,
    conn: asyncpg.Connection,
    kinds: list[str],
    schedules: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @venturi.task(kind="c_other")
    async def other(ctx: Context[Any], carry: Tick) -> None: ...

    venturi.schedule(other, "30 * * * *", Tick(), name="c_late")

    @venturi.task(kind="c_late", cron="0 * * * *")
    async def late(ctx: Context[Any], carry: Tick) -> None: ...

    @venturi.task(kind="c_fine", cron="0 * * * *")
    async def fine(ctx: Context[Any], carry: Tick) -> None: ...

    assert fine.cron is not None
    now = await conn.fetchval("SELECT now()")
    await db.schedules.schedule_init(
        pool, schema="venturi", name="c_fine", slot=fine.cron.latest(now) - timedelta(hours=1)
    )
    worker = Worker(None, pool, [other, late, fine])
    scheduler = CronScheduler()
    with caplog.at_level(logging.WARNING, logger="venturi.cron"):
        await scheduler.run(pool, worker)
        await scheduler.run(pool, worker)
    assert len(await admin.list_jobs(conn, kind="c_fine")) == 1
    assert await admin.list_jobs(conn, kind="c_late") == []
    assert await admin.list_jobs(conn, kind="c_other") == []
    [said] = caplog.records
    assert "two schedules are named 'c_late'" in said.getMessage() and not said.exc_info


@pytest.mark.parametrize("processes", [[], ["--processes", "2"]], ids=["one", "two"])
def test_the_cli_refuses_a_clash_in_one_line(tmp_path: Path, processes: list[str]) -> None:
    (tmp_path / "tasks.py").write_text(textwrap.dedent(CLASH), encoding="utf-8")
    # This checkout's venturi, not an installed one: the module's directory is the cwd.
    env = {"PYTHONPATH": str(ROOT)}
    args = ("worker", "tasks", "--dsn", UNREACHABLE, *processes)
    out = venturi_cli(*args, cwd=tmp_path, env=env, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("venturi: two schedules are named 'late'"), out.stderr
