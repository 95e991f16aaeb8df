"""`manage.py venturi worker --middleware MODULE:ATTR`, as `venturi worker`'s: every run
goes through the middleware named, and one that cannot be had is refused at start, one
line naming the option, exit 2."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import asyncpg

import venturi
from tests.support import ROOT, wait_for
from tests.support.django_app.run import MANAGE, environment, manage, scenario
from tests.support.middlewares import wrapped


async def test_manage_venturi_worker_runs_through_the_middleware_named(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, kinds: list[str]
) -> None:
    note = await scenario("enqueue_one", dsn)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(MANAGE),
        "venturi",
        "worker",
        "tests.support.django_app.jobs",
        "--poll-max",
        "1",
        "--middleware",
        "tests.support.middlewares:record",
        cwd=ROOT,
        env=environment(dsn, VENTURI_TEST_RUNS_DIR=str(tmp_path)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def done() -> bool:
            job = await venturi.get_job(conn, note["id"])
            return job is not None and job.status == "completed"

        await wait_for(done, within=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert wrapped(tmp_path) == [note["id"]]


async def test_a_middleware_that_cannot_be_had_is_refused_at_start(dsn: str) -> None:
    out = await manage(dsn, "venturi", "worker", "--middleware", "venturi.tracing:nope")
    assert out.returncode == 2, (out.stdout, out.stderr)
    [line] = out.stderr.strip().splitlines()
    assert "--middleware venturi.tracing:nope: module 'venturi.tracing' has no attribute" in line
    assert "Traceback" not in out.stderr and "venturi worker:" not in out.stdout
