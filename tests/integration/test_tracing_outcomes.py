"""run_span's venturi.outcome and status agree with what the run settles as: a timeout is
timed-out and an ERROR, a return that is not an outcome failed and an ERROR, a job an
operator cancelled is cancelled, a workflow run that waits is waiting, and a run the
worker stops at shutdown is a release (the last three not errors)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from opentelemetry.trace import StatusCode

import venturi
from tests.support import wait_status
from tests.support.tracing import exporter
from venturi import Context, admin, tracing
from venturi.runtime.worker import Worker


async def test_each_span_says_what_its_run_settled_as(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    spans = exporter()
    spans.clear()
    running = {"o_cancel": asyncio.Event(), "o_stuck": asyncio.Event()}

    @venturi.task(kind="o_timeout", timeout=0.2, max_failures=1)
    async def timeout(ctx: Context[Any], carry: int) -> None:
        await asyncio.Event().wait()

    @venturi.task(kind="o_invalid", max_failures=1)
    async def invalid(ctx: Context[Any], carry: int) -> Any:
        return 42

    @venturi.task(kind="o_nan", max_failures=1)
    async def nan(ctx: Context[Any], carry: int) -> Any:
        return venturi.complete({"ratio": float("nan")})  # cannot be stored: failed

    @venturi.task(kind="o_badpause", max_failures=1)
    async def badpause(ctx: Context[Any], carry: int) -> Any:
        return venturi.pause("not an int")  # its carry is refused: failed

    @venturi.task(kind="o_cancel")
    async def cancel(ctx: Context[Any], carry: int) -> Any:
        running["o_cancel"].set()
        await ctx.cancelled()
        return venturi.retry(after=60)

    @venturi.task(kind="o_wait")
    async def wait(ctx: Context[Any], carry: int) -> None:
        await ctx.wait_for_signal("go", int)

    @venturi.task(kind="o_stuck")
    async def stuck(ctx: Context[Any], carry: int) -> None:
        running["o_stuck"].set()
        await asyncio.Event().wait()

    tasks = [timeout, invalid, nan, badpause, cancel, wait, stuck]
    ids = {t.kind: await t.enqueue(conn, 0) for t in tasks}
    w = Worker(
        None,
        dsn,
        tasks,
        middleware=[tracing.run_span],
        poll_max=0.2,
        heartbeat=0.2,
        concurrency=8,
        shutdown_timeout=0.2,
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(w.run(stop))
    try:
        await asyncio.wait_for(running["o_cancel"].wait(), 30)
        await admin.cancel_jobs(conn, [ids["o_cancel"]])
        for kind, status in (
            ("o_timeout", "dead"),
            ("o_invalid", "dead"),
            ("o_nan", "dead"),
            ("o_badpause", "dead"),
            ("o_cancel", "cancelled"),
            ("o_wait", "waiting"),
        ):
            await wait_status(conn, ids[kind], status)
        await asyncio.wait_for(running["o_stuck"].wait(), 30)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 60)
    await wait_status(conn, ids["o_stuck"], "pending")  # released at the stop

    runs = {
        dict(s.attributes or {})["venturi.job.id"]: s
        for s in spans.get_finished_spans()
        if s.name.startswith("venturi run o_")
    }
    said = {
        kind: (dict(runs[i].attributes or {})["venturi.outcome"], runs[i].status.status_code)
        for kind, i in ids.items()
    }
    # Before: cancelled/UNSET, invalid/UNSET, retry, no outcome, cancelled.
    assert said == {
        "o_timeout": ("timed-out", StatusCode.ERROR),
        "o_invalid": ("failed", StatusCode.ERROR),
        # An outcome that cannot be stored settles as failed (review probe: completed, pause).
        "o_nan": ("failed", StatusCode.ERROR),
        "o_badpause": ("failed", StatusCode.ERROR),
        "o_cancel": ("cancelled", StatusCode.UNSET),
        "o_wait": ("waiting", StatusCode.UNSET),
        "o_stuck": ("release", StatusCode.UNSET),
    }
    assert runs[ids["o_invalid"]].status.description == "handler returned int, not an outcome"
    assert runs[ids["o_timeout"]].status.description == "run exceeded its timeout of 0.2s"
    assert "cannot be stored" in (runs[ids["o_nan"]].status.description or "")
