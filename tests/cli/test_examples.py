"""Every example in examples/ runs as it is, as a user would run it (a subprocess with
VENTURI_DSN pointing at this test's database), and leaves the jobs it says it did."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import asyncpg

import venturi
from venturi import admin

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def run_example(name: str, dsn: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        cwd=EXAMPLES,
        env={**os.environ, "VENTURI_DSN": dsn},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"{name} failed:\n{out.decode()}\n{err.decode()}"
    return out.decode()


def test_every_example_has_a_test() -> None:
    tested = {
        "transactional_enqueue.py",
        "long_job_checkpoint.py",
        "web_enqueue.py",
        "mount_dashboard.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


async def test_transactional_enqueue(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("transactional_enqueue.py", dsn)
    assert "rolled back" in out and out.rstrip().endswith("the failed sign-up left neither")
    # Two sign-ups, one job: the rolled-back one left no job row behind.
    [job] = await admin.list_jobs(conn, kind="example_welcome_email")
    assert job.status == "completed"
    info = await venturi.get_job(conn, job.id)
    assert info is not None and info.result["sent_to"].startswith("alice-")


async def test_long_job_survives_a_worker_restart(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("long_job_checkpoint.py", dsn)
    assert "job is pending with checkpoint done=" in out
    assert out.rstrip().endswith("ok: every chunk once, across a restart")
    [job] = await admin.list_jobs(conn, kind="example_import")
    assert job.status == "completed" and job.failures == 0
    journal = await venturi.get_journal(conn, job.id)
    claims = [e for e in journal if e.event == "claimed"]
    assert len({e.worker for e in claims}) == 2  # two worker processes
    assert [e.event for e in journal].count("paused") == len(claims) - 1
    info = await venturi.get_job(conn, job.id)
    assert info is not None and info.result == {"file": "orders.csv", "chunks": 30}
    # The carry keeps the last checkpoint (completing does not write it back).
    assert info.carry["done"] == 20


async def test_web_enqueue(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("web_enqueue.py", dsn)
    assert "-> 202" in out and "-> 422" in out and "Welcome to python-" in out
    jobs = await admin.list_jobs(conn, kind="example_fetch_title")
    # Three accepted posts, one of them a repeat: two jobs, both done.
    assert [j.status for j in jobs] == ["completed", "completed"]


async def test_mount_dashboard(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("mount_dashboard.py", dsn)
    lines = out.splitlines()
    assert "GET / -> 200 the application's own page" in lines
    # Under the prefix: the login redirect stays inside it, the API needs the token.
    assert "GET /jobs-admin/ -> 303 /jobs-admin/login?next=%2Fjobs-admin%2F" in lines
    assert any(line.startswith("GET /jobs-admin/api/stats -> 401") for line in lines)
    assert any(line.startswith("GET /jobs-admin/api/stats (bearer) -> 200") for line in lines)
    [job] = await admin.list_jobs(conn, kind="example_send_invoice")
    assert f"job {job.id}: example_send_invoice pending carry={{'number': '2026-0042'}}" in lines
