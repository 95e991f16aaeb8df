"""Managing single jobs: ``venturi.delete_job`` and ``venturi jobs delete`` (refused
while claimed), ``venturi jobs run-now`` (visible now, a worker woken) and
``venturi jobs set-priority``, each journaled or logged with the operator."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, venturi_cli_async, wait_stat, wait_status
from tests.support.claims import claim
from venturi import ConfigError, Context, Priority, admin, db
from venturi.runtime.worker import Worker

W = db.Claimant("w:1")


@pytest.fixture
def task(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="m_job")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def test_delete_job_deletes_an_unclaimed_job_and_refuses_a_claimed_one(
    conn: asyncpg.Connection, task: venturi.Task[Item], caplog: pytest.LogCaptureFixture
) -> None:
    pending = await task.enqueue(conn, Item(1))
    claimed = await task.enqueue(conn, Item(2))
    [row] = await claim(conn, W, ["m_job"])
    assert row["id"] == pending
    [row2] = await claim(conn, W, ["m_job"])
    assert row2["id"] == claimed
    with pytest.raises(venturi.VenturiError, match="is claimed: a running job cannot be deleted"):
        await venturi.delete_job(conn, claimed)
    assert (await venturi.get_job(conn, claimed)).status == "claimed"  # type: ignore[union-attr]
    [change] = await admin.cancel_jobs(conn, [pending])  # asks its worker to stop
    assert change.done and change.now == "claimed"
    await db.settle.job_cancel_if_owned(
        conn, schema="venturi", claimant=W, job_id=pending, attempt=1, detail="test"
    )
    with caplog.at_level(logging.INFO, logger="venturi.admin"):
        assert await venturi.delete_job(conn, pending, operator="operator:me@here") is True
    assert f"job {pending} (m_job, cancelled) deleted by operator:me@here" in caplog.text
    assert await venturi.get_job(conn, pending) is None
    assert await venturi.get_journal(conn, pending) == []
    assert await venturi.delete_job(conn, pending) is False  # gone already


async def test_cli_delete_refuses_a_claimed_job_and_deletes_the_rest(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    claimed = await task.enqueue(conn, Item(1))
    [row] = await claim(conn, W, ["m_job"])
    assert row["id"] == claimed
    pending = await task.enqueue(conn, Item(2))
    out = await venturi_cli_async("jobs", "delete", str(claimed), str(pending), "999999", dsn=dsn)
    assert out.returncode == 2, out.stderr
    assert f"job {pending} (m_job): pending -> deleted" in out.stdout
    assert "deleted 1 of 3 job(s)" in out.stdout
    assert f"job {claimed} (m_job) is claimed: a running job cannot be deleted" in out.stderr
    assert "job 999999 does not exist" in out.stderr
    assert await venturi.get_job(conn, pending) is None
    assert (await venturi.get_job(conn, claimed)).status == "claimed"  # type: ignore[union-attr]


async def test_cli_run_now_makes_a_job_visible_and_wakes_a_worker(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    later = await task.enqueue(conn, Item(1), after=3600)
    # A poll far longer than the test: only the run-now's notification can wake it.
    worker = Worker(None, dsn, [task], poll_max=600)
    async with running(worker):
        await wait_stat(worker, "empty_claims", 1)
        out = await venturi_cli_async("jobs", "run-now", str(later), dsn=dsn)
        assert out.returncode == 0, out.stderr
        assert f"job {later} (m_job): visible now" in out.stdout
        await wait_status(conn, later, "completed", within=30)
    journal = await venturi.get_journal(conn, later)
    released = [e for e in journal if e.event == "released"]
    assert [e.detail for e in released] == ["run now"]
    assert released[0].worker is not None and released[0].worker.startswith("operator:")
    again = await venturi_cli_async("jobs", "run-now", str(later), dsn=dsn)
    assert again.returncode == 2
    assert "is completed: only pending or waiting jobs can be run now" in again.stderr


async def test_set_priority_of_a_pending_job_is_journaled_with_the_operator(
    dsn: str, conn: asyncpg.Connection, task: venturi.Task[Item]
) -> None:
    job_id = await task.enqueue(conn, Item(1))
    out = await venturi_cli_async("jobs", "set-priority", str(job_id), "high", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert f"job {job_id} (m_job): normal -> high" in out.stdout
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.priority is Priority.HIGH
    [entry] = [e for e in await venturi.get_journal(conn, job_id) if e.event == "released"]
    assert entry.detail == "priority set to high (was normal)"
    assert entry.worker is not None and entry.worker.startswith("operator:")
    # Already there: done, nothing journaled; a claimed job is refused; a bad tier is
    # one line.
    [same] = await admin.set_priority(conn, [job_id], "HIGH")
    assert same.done and same.message.endswith("already high")
    [row] = await claim(conn, W, ["m_job"])
    refused = await venturi_cli_async("jobs", "set-priority", str(job_id), "low", dsn=dsn)
    assert refused.returncode == 2
    assert "is claimed: only a pending job's priority can be set" in refused.stderr
    bad = await venturi_cli_async("jobs", "set-priority", str(job_id), "urgent", dsn=dsn)
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "venturi: priority must be one of high, normal, low, got 'urgent'"
    )
    with pytest.raises(ConfigError, match="priority must be one of"):
        await admin.set_priority(conn, [job_id], 0)  # type: ignore[arg-type]
    assert len([e for e in await venturi.get_journal(conn, job_id) if e.event == "released"]) == 1
    assert row["id"] == job_id
