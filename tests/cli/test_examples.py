"""Every example in examples/ runs as it is, as a user would run it (a subprocess with
VENTURI_DSN pointing at this test's database), and leaves the jobs it says it did."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import asyncpg
import pytest

import venturi
from tests.support.waits import wait_for
from tests.support.workers import events
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
        "flask_sqlalchemy.py",
        "fastapi_sqlalchemy.py",
        "workflow_order.py",
        "tenant_fairness.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
    assert {p.name for p in EXAMPLES.iterdir() if p.is_dir()} - {"__pycache__"} == {"django_shop"}


DOCS = EXAMPLES.parent / "docs"


@pytest.mark.parametrize(
    ("doc", "example"),
    [
        ("fastapi-sqlalchemy.md", "fastapi_sqlalchemy.py"),
        ("flask-sqlalchemy.md", "flask_sqlalchemy.py"),
    ],
)
def test_the_docs_code_is_the_examples_code(doc: str, example: str) -> None:
    """Each Python block of the page is a run of the example's lines (at any one
    indentation), so the code a reader copies is the code the example's test runs."""
    page = (DOCS / doc).read_text()
    source = (EXAMPLES / example).read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    assert len(blocks) >= 2
    for block in blocks:
        lines = block.rstrip("\n").split("\n")
        assert any(
            "\n".join(f"{indent}{line}" if line else "" for line in lines) in source
            for indent in ("", "    ", "        ")
        ), f"{doc}: this block is not {example}'s code:\n{block}"


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
    assert events(journal).count("paused") == len(claims) - 1
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


async def test_flask_sqlalchemy(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("flask_sqlalchemy.py", dsn)
    assert "-> 201" in out and "(fails after the enqueue) -> 500" in out
    assert "'status': 'completed'" in out
    assert out.rstrip().endswith("the failed sign-up left neither a user nor a job")
    # Two sign-ups, one user, one job: the failed view rolled back both.
    [job] = await admin.list_jobs(conn, kind="example_flask_welcome")
    assert job.status == "completed"
    info = await venturi.get_job(conn, job.id)
    assert info is not None and info.result["sent_to"].startswith("alice-")


async def test_fastapi_sqlalchemy(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("fastapi_sqlalchemy.py", dsn)
    # 2xx after the commit, with the committed order's id read back (expire_on_commit).
    assert "POST /orders teapot -> 202 {'order': 1, 'job': " in out
    assert "POST /orders (no item) -> 422" in out
    assert "'status': 'completed', 'result': {'shipped': 1}" in out
    [job] = await admin.list_jobs(conn, kind="example_fastapi_ship")
    assert job.status == "completed"


async def test_django_shop(empty_dsn: str) -> None:
    """migrate (venturi's schema with the shop's tables), a view that enqueues inside
    atomic() through the test client, then ``manage.py venturi worker``."""
    shop = EXAMPLES / "django_shop"
    env = {**os.environ, "VENTURI_DSN": empty_dsn}

    async def run(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=shop,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, f"{args}:\n{out.decode()}\n{err.decode()}"
        return out.decode()

    assert "Applying venturi.0001_venturi_schema... OK" in await run("manage.py", "migrate")
    out = await run("try_it.py")
    assert "POST /orders teapot -> 202" in out and "POST /orders cup x0 -> 422" in out
    assert "orders: ['teapot']" in out
    conn = await asyncpg.connect(empty_dsn)
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "manage.py",
        "venturi",
        "worker",
        "orders.jobs",
        cwd=shop,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        jobs = await admin.list_jobs(conn)
        # The accepted order's shipping job and receipt task; the refused one left none.
        assert sorted(j.kind for j in jobs) == ["django.default", "shop_ship"]

        async def done() -> bool:
            return all(j.status == "completed" for j in await admin.list_jobs(conn))

        await wait_for(done, within=60)
        receipt = next(j for j in await admin.list_jobs(conn) if j.kind == "django.default")
        info = await venturi.get_job(conn, receipt.id)
        assert info is not None and info.result == "receipt for order 1"
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.communicate(), 60)
        await conn.close()
    assert worker.returncode == 0


async def test_workflow_order(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("workflow_order.py", dsn)
    assert "waiting for approval, holding no slot" in out
    assert "charge requests: 1, reservations: 1" in out
    assert out.rstrip().endswith("ok: each step once across every replay, three parcels shipped")
    [job] = await admin.list_jobs(conn, kind="example_order")
    assert job.status == "completed"
    parcels = await admin.list_jobs(conn, kind="example_ship_parcel")
    assert [p.status for p in parcels] == ["completed"] * 3
    steps = await conn.fetch("SELECT name FROM venturi.steps WHERE job_id = $1", job.id)
    assert {"charge", "reserve", "cool-off", "ship-0", "ship-1", "ship-2"} <= {
        r["name"] for r in steps
    }
    journal = await venturi.get_journal(conn, job.id)
    assert any(e.event == "woken" and e.detail == "signal approval" for e in journal)


async def test_tenant_fairness(dsn: str, conn: asyncpg.Connection) -> None:
    out = await run_example("tenant_fairness.py", dsn)
    assert "most exports of one customer at once: " in out
    assert out.rstrip().endswith("ok: no customer above its cap, the small one among the first")
    jobs = await admin.list_jobs(conn, kind="example_export", limit=200)
    assert len(jobs) == 133 and {j.status for j in jobs} == {"completed"}
    assert {j.group.split("-")[0] for j in jobs if j.group} == {"big", "small", "paying"}
