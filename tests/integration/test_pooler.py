"""Behind PgBouncer in transaction pooling mode: enqueue and workers through the pooler,
LISTEN on a direct connection (``listen_dsn``) or polling without one, every job run once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import ROOT, pgbouncer, running, wait_for, wait_stat, wait_status, workertasks
from tests.support import sql as test_sql
from venturi import db
from venturi.runtime.worker import Worker

# Serial (tests/support/alone.py): a PgBouncer of its own with four server connections
# that four worker processes share, and waits on what passes through it.
pytestmark = [
    pytest.mark.skipif(
        pgbouncer.binary() is None, reason="pgbouncer is not installed (.ci/run installs it)"
    ),
    pytest.mark.serial,
]


@pytest.fixture(scope="module")
def bouncer(pg_admin_dsn: str) -> Iterator[pgbouncer.PgBouncer]:
    """One pgbouncer for the module: transaction pooling, 4 server connections per
    database, fewer than the clients the tests open through it."""
    with pgbouncer.running(pg_admin_dsn, pool_size=4) as b:
        yield b


class Mark(msgspec.Struct):
    n: int


def _tasks(ran: list[int]) -> list[venturi.Task[Any]]:
    @venturi.task(kind="pooled_mark")
    async def mark(ctx: venturi.Context[Any], carry: Mark) -> None:
        ran.append(ctx.job.id)

    return [mark]


async def test_a_cached_connection_breaks_behind_the_pooler_and_a_marked_one_does_not(
    dsn: str, bouncer: pgbouncer.PgBouncer
) -> None:
    # Why the marker exists: more clients than server connections, so consecutive
    # statements of one client land on different server connections, where asyncpg's
    # named prepared statements do not exist.
    async def client(target: str) -> None:
        conn = await db.connect.connect(target)
        try:
            for _ in range(40):
                await db.schema.schema_version(conn, schema="venturi")
                await asyncio.sleep(0)  # stays: a yield, so the clients interleave
        finally:
            await conn.close()

    cached = bouncer.through(dsn, mark=False)
    outcomes = await asyncio.gather(*(client(cached) for _ in range(12)), return_exceptions=True)
    # 12 clients prepare __asyncpg_stmt_1__ on 4 server connections: some find it missing
    # on the connection they land on next, the others find another client's already there.
    broken = (asyncpg.InvalidSQLStatementNameError, asyncpg.DuplicatePreparedStatementError)
    assert any(isinstance(o, broken) for o in outcomes), outcomes
    marked = bouncer.through(dsn)
    outcomes = await asyncio.gather(*(client(marked) for _ in range(12)), return_exceptions=True)
    assert [o for o in outcomes if o is not None] == []


async def test_enqueue_and_a_worker_through_the_pooler_run_every_job_once(
    dsn: str, bouncer: pgbouncer.PgBouncer
) -> None:
    ran: list[int] = []
    (mark,) = _tasks(ran)
    pooled = bouncer.through(dsn)
    # An application's own connection through the pooler: no statement cache.
    conn = await asyncpg.connect(bouncer.through(dsn, mark=False), statement_cache_size=0)
    try:
        ids = await venturi.enqueue_many(conn, [mark.job(Mark(i)) for i in range(300)])
        async with conn.transaction():
            ids.append(await mark.enqueue(conn, Mark(300)))
        # poll_max far beyond the waits below: only a notification wakes this worker.
        worker = Worker(None, pooled, [mark], concurrency=4, poll_max=120, listen_dsn=dsn)
        async with running(worker):
            await wait_for(lambda: _all_ran(ran, ids), within=60)
            await wait_stat(worker, "empty_claims", 1)
            late = await mark.enqueue(conn, Mark(301))
            await wait_status(conn, late, "completed", within=20)
            ids.append(late)
        assert Counter(ran) == Counter(ids)
        assert worker.stats["completed"] == len(ids)
    finally:
        await conn.close()


async def test_without_listen_dsn_the_worker_polls_through_the_pooler(
    dsn: str, bouncer: pgbouncer.PgBouncer, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    (mark,) = _tasks(ran)
    conn = await asyncpg.connect(dsn)
    try:
        worker = Worker(None, bouncer.through(dsn), [mark], concurrency=2, poll_max=120)
        with caplog.at_level("INFO", logger="venturi.worker"):
            async with running(worker):
                await wait_stat(worker, "empty_claims", 1)
                # No notification reaches it: the one-second poll claims the job.
                job = await mark.enqueue(conn, Mark(1))
                await wait_status(conn, job, "completed", within=20)
        assert ran == [job]
        assert "no LISTEN" in caplog.text
        assert await conn.fetchval(test_sql.statement("listening_backends")) == 0
    finally:
        await conn.close()


async def _all_ran(ran: list[int], ids: list[int]) -> bool:
    return set(ran) >= set(ids)


async def test_four_worker_processes_through_the_pooler_run_every_job_once(
    dsn: str, bouncer: pgbouncer.PgBouncer, tmp_path: Path
) -> None:
    # The functional version of the pooler benchmark: more worker connections (4
    # processes x 3) than the pooler's 4 server connections.
    conn = await asyncpg.connect(dsn)
    try:
        ids = await venturi.enqueue_many(
            conn, [workertasks.count.job(workertasks.Item(i)) for i in range(2000)]
        )
        env = {
            **os.environ,
            "VENTURI_DSN": bouncer.through(dsn),
            "VENTURI_LISTEN_DSN": dsn,
            "VENTURI_TEST_RUNS_DIR": str(tmp_path),
        }
        proc = _supervisor(env, "--processes", "4", "--concurrency", "4", "--poll-max", "60")
        try:
            await wait_for(lambda: _completed(conn, ids), within=120, every=0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = await asyncio.to_thread(proc.communicate, timeout=60)
        assert proc.returncode == 0, out
        runs = _runs(tmp_path)
        assert Counter(int(job) for job, _, _ in runs) == Counter(ids)
        assert len({pid for _, _, pid in runs}) > 1
        assert "InvalidSQLStatementName" not in out and "prepared statement" not in out
    finally:
        await conn.close()


def _supervisor(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "venturi", "worker", "tests.support.workertasks", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _runs(where: Path) -> list[list[str]]:
    """Each recorded run: job id, attempt, pid (tests.support.workertasks)."""
    return [line.split() for f in where.glob("runs-*.txt") for line in f.read_text().splitlines()]


async def _completed(conn: asyncpg.Connection, ids: list[int]) -> bool:
    counts = await db.reads.job_counts(conn, schema="venturi", ids=ids)
    return bool(sum(r["jobs"] for r in counts if r["status"] == "completed") == len(ids))
