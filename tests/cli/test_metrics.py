"""Queue gauges: `venturi metrics --port P` (no worker), the same gauges from a worker
(QueueGauges), and the opt-in warning of kinds that no live worker registers."""

from __future__ import annotations

import asyncio
import logging
import signal

import asyncpg
import pytest

import venturi
from tests.support import (
    assert_one_clean_error,
    running,
    venturi_cli,
    wait_stat,
    wait_status,
)
from tests.support.exporter import scrape_when, spawn_exporter
from tests.support.ports import free_port
from venturi import db
from venturi.runtime.worker import Worker


async def test_exporter_serves_queue_gauges_without_a_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="m_mail")
    async def mail(ctx: venturi.Context[None], carry: None) -> None:
        pass

    @venturi.task(kind="m_later")
    async def later(ctx: venturi.Context[None], carry: None) -> None:
        pass

    mails = [await mail.enqueue(conn, None) for _ in range(3)]
    await later.enqueue(conn, None, after=3600)
    port = free_port()
    proc = spawn_exporter(dsn, port)
    try:
        lines = await scrape_when(port, 'venturi_queue_jobs{kind="m_mail",status="due"} 3.0')
        assert 'venturi_queue_jobs{kind="m_later",status="scheduled"} 1.0' in lines
        assert 'venturi_queue_jobs{kind="m_mail",status="claimed"} 0.0' in lines
        assert any(
            line.startswith('venturi_queue_oldest_due_seconds{kind="m_mail"} ') for line in lines
        )
        assert 'venturi_queue_kind_without_worker{kind="m_mail"} 1.0' in lines
        assert 'venturi_queue_kind_without_worker{kind="m_later"} 0.0' in lines  # none due
        assert 'venturi_queue_workers{state="live"} 0.0' in lines
        assert "venturi_queue_up 1.0" in lines
        # A worker for the kind starts: live, and the kind is served (then drained).
        w = Worker(None, dsn, [mail], poll_max=0.2, heartbeat=0.1)
        async with running(w):
            lines = await scrape_when(port, 'venturi_queue_workers{state="live"} 1.0')
            await scrape_when(port, 'venturi_queue_kind_workers{kind="m_mail"} 1.0')
            await scrape_when(port, 'venturi_queue_kind_without_worker{kind="m_mail"} 0.0')
            for job_id in mails:
                await wait_status(conn, job_id, "completed", within=30)
            # While the worker still serves the kind: once it stops, a kind without
            # unfinished jobs or workers leaves the gauges (a read after the stop would
            # never show it again).
            await scrape_when(port, 'venturi_queue_jobs{kind="m_mail",status="due"} 0.0')
        await venturi_cli_pause(dsn, "m_later")
        await scrape_when(port, 'venturi_queue_kind_paused{kind="m_later"} 1.0')
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    assert "serving queue metrics" in out and "Traceback" not in out


async def venturi_cli_pause(dsn: str, kind: str) -> None:
    out = await asyncio.to_thread(venturi_cli, "kinds", "pause", kind, dsn=dsn)
    assert out.returncode == 0, out.stderr


def test_exporter_bad_input_is_one_line(dsn: str) -> None:
    assert_one_clean_error(venturi_cli("metrics", "--port", "0", dsn=dsn), "port must be")
    assert_one_clean_error(
        venturi_cli("metrics", "--port", "9", "--interval", "0", dsn=dsn), "interval must be"
    )
    assert_one_clean_error(
        venturi_cli("metrics", "--port", "9", "--liveness", "-3", dsn=dsn), "liveness"
    )
    assert_one_clean_error(
        venturi_cli("worker", "tests.support.logtasks", "--queue-metrics", dsn=dsn),
        "--queue-metrics goes with --metrics-port",
    )


async def test_a_worker_exports_the_queue_gauges_too(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="m_own")
    async def own(ctx: venturi.Context[None], carry: None) -> None:
        pass

    @venturi.task(kind="m_orphan")
    async def orphan(ctx: venturi.Context[None], carry: None) -> None:
        pass

    await orphan.enqueue(conn, None)
    port = free_port()
    w = Worker(
        None,
        dsn,
        [own],
        poll_max=0.2,
        metrics_port=port,
        maintenance=[venturi.QueueGauges(interval=0.1)],
    )
    async with running(w):
        lines = await scrape_when(port, 'venturi_queue_kind_without_worker{kind="m_orphan"} 1.0')
        assert 'venturi_queue_kind_workers{kind="m_own"} 1.0' in lines
        assert any(line.startswith("venturi_claims_total ") for line in lines)  # its own too


async def test_unserved_kind_warning_is_opt_in_and_said_once(
    dsn: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture, kinds: list[str]
) -> None:
    @venturi.task(kind="u_mine")
    async def mine(ctx: venturi.Context[None], carry: None) -> None:
        pass

    @venturi.task(kind="u_nobody")
    async def nobody(ctx: venturi.Context[None], carry: None) -> None:
        pass

    nothing = await nobody.enqueue(conn, None)
    caplog.set_level(logging.WARNING, "venturi.worker")
    plain = Worker(None, dsn, [mine], poll_max=0.2)
    async with running(plain):
        await wait_stat(plain, "empty_claims", 2)
    assert not _warnings(caplog)  # off by default
    warn = Worker(
        None, dsn, [mine], poll_max=0.2, maintenance=[venturi.UnservedKinds(interval=0.05)]
    )
    async with running(warn):
        await wait_stat(warn, "maintenance_runs:unserved_kinds", 5)
    said = _warnings(caplog)
    assert len(said) == 1 and "kind u_nobody has 1 due job(s)" in said[0].getMessage()
    assert getattr(said[0], "kind", None) == "u_nobody"
    # Not said when a live worker registers the kind, though this one does not: that
    # worker's one slot is busy with a job of higher priority, so the job stays due.
    caplog.clear()
    started = asyncio.Event()

    @venturi.task(kind="u_block", priority=venturi.Priority.HIGH)
    async def block(ctx: venturi.Context[None], carry: None) -> None:
        started.set()
        await ctx.cancelled()

    await block.enqueue(conn, None)
    other = Worker(None, dsn, [nobody, block], poll_max=0.2, concurrency=1)
    async with running(other):
        await asyncio.wait_for(started.wait(), 30)
        warn = Worker(
            None, dsn, [mine], poll_max=0.2, maintenance=[venturi.UnservedKinds(interval=0.05)]
        )
        async with running(warn):
            await wait_stat(warn, "maintenance_runs:unserved_kinds", 3)
        assert await _status(conn, nothing) == "pending"
    assert not _warnings(caplog)
    # Nor for a kind an operator paused, with no worker at all.
    await db.kinds.kind_pause(conn, schema="venturi", kinds=["u_nobody"], paused_by="t", reason="")
    warn = Worker(
        None, dsn, [mine], poll_max=0.2, maintenance=[venturi.UnservedKinds(interval=0.05)]
    )
    async with running(warn):
        await wait_stat(warn, "maintenance_runs:unserved_kinds", 3)
    assert not _warnings(caplog)


async def _status(conn: asyncpg.Connection, job_id: int) -> str | None:
    job = await venturi.get_job(conn, job_id)
    return None if job is None else job.status


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "no live worker registers it" in r.getMessage()]
