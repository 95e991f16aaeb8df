"""`venturi worker --middleware MODULE:ATTR`: every run goes through each middleware
named (venturi.tracing:run_span among them), and one that cannot be had is refused at
start, one line naming the option, exit 2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

import venturi
from tests.support import ROOT, assert_one_clean_error, venturi_cli, wait_status, workertasks
from tests.support.middlewares import wrapped


def _spawn(dsn: str, runs: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "venturi", "worker", "tests.support.workertasks", *args],
        cwd=ROOT,
        env={**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(runs)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def test_every_run_goes_through_the_middleware_named(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    ids = await venturi.enqueue_many(
        conn, [workertasks.count.job(workertasks.Item(i)) for i in range(3)]
    )
    proc = _spawn(
        dsn,
        tmp_path,
        "--middleware",
        "venturi.tracing:run_span",
        "--middleware",
        "tests.support.middlewares:record",
    )
    try:
        for job_id in ids:
            await wait_status(conn, job_id, "completed", within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    assert sorted(wrapped(tmp_path)) == sorted(ids)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("venturi.tracing", "must be MODULE:ATTR"),
        ("venturi.tracing:", "must be MODULE:ATTR"),
        ("no_such_module_here:mw", "cannot import 'no_such_module_here'"),
        ("venturi.tracing:nope", "module 'venturi.tracing' has no attribute 'nope'"),
        ("tests.support.middlewares:not_async", "must be an async def mw(ctx, carry, call_next)"),
    ],
)
def test_a_middleware_that_cannot_be_had_is_one_line(dsn: str, spec: str, said: str) -> None:
    out = venturi_cli("worker", "tests.support.workertasks", "--middleware", spec, dsn=dsn)
    assert_one_clean_error(out, f"--middleware {spec}: ", said)
    assert "started" not in out.stderr  # refused before the worker starts
