"""Worker(middleware=[...]): the order of the chain, a failing middleware is a failed
execution of that run only, sync handlers through it, and the error-reporter example."""

from __future__ import annotations

import threading
from typing import Any

import asyncpg

import venturi
from tests.support import running, wait_status
from venturi import Context, middleware
from venturi.runtime.worker import Worker


def tracer(name: str, seen: list[str]) -> middleware.Middleware:
    async def mw(ctx: Context[Any], carry: Any, call_next: middleware.CallNext) -> Any:
        seen.append(f"{name}> {ctx.job.id}")
        result = await call_next()
        seen.append(f"<{name} {ctx.job.id}")
        return result

    return mw


async def test_middleware_wraps_every_run_in_order(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: list[str] = []

    @venturi.task(kind="mw_async")
    async def run_async(ctx: Context[Any], carry: None) -> None:
        seen.append(f"handler {ctx.job.id}")

    @venturi.task(kind="mw_sync")
    def run_sync(ctx: Context[Any], carry: None) -> Any:
        # A plain def runs in a thread; call_next awaits it.
        assert threading.current_thread() is not threading.main_thread()
        seen.append(f"handler {ctx.job.id}")
        return venturi.complete({"sync": True})

    a = await run_async.enqueue(conn, None)
    w = Worker(
        None,
        dsn,
        [run_async],
        poll_max=0.2,
        concurrency=1,
        middleware=[tracer("outer", seen), tracer("inner", seen)],
    )
    async with running(w):
        await wait_status(conn, a, "completed")
    assert seen == [f"outer> {a}", f"inner> {a}", f"handler {a}", f"<inner {a}", f"<outer {a}"]
    seen.clear()
    s = await run_sync.enqueue(conn, None)
    w = Worker(None, dsn, [run_sync], poll_max=0.2, middleware=[tracer("only", seen)])
    async with running(w):
        await wait_status(conn, s, "completed")
    assert seen == [f"only> {s}", f"handler {s}", f"<only {s}"]
    result = await venturi.get_result(conn, s)
    assert result == {"sync": True}  # the handler's outcome passed through the chain


async def test_a_failing_middleware_fails_that_run_only(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    ran: list[int] = []

    @venturi.task(kind="mw_victim", max_failures=1)
    async def victim(ctx: Context[Any], carry: int) -> None:
        ran.append(carry)

    async def picky(ctx: Context[Any], carry: int, call_next: middleware.CallNext) -> Any:
        if carry == 1:
            raise PermissionError("no session for tenant 1")
        result = await call_next()
        if carry == 2:
            raise RuntimeError("commit failed after the handler")
        return result

    ids = [await victim.enqueue(conn, n) for n in (1, 2, 3)]
    w = Worker(None, dsn, [victim], poll_max=0.2, middleware=[picky])
    async with running(w):
        for job_id, status in zip(ids, ("dead", "dead", "completed"), strict=True):
            await wait_status(conn, job_id, status)
    assert sorted(ran) == [2, 3]  # the first never reached its handler
    for job_id, error in (
        (ids[0], "PermissionError: no session for tenant 1"),
        (ids[1], "RuntimeError: commit failed after the handler"),
    ):
        journal = await venturi.get_journal(conn, job_id)
        failed = next(e for e in journal if e.event == "failed")
        assert error in (failed.detail or "") and "Traceback" in (failed.detail or "")
    # Both failures ended their job (max_failures=1): counted dead, not failed.
    assert (w.stats["dead"], w.stats["failed"], w.stats["completed"]) == (2, 0, 1)


async def test_error_reporter_sees_each_failure_and_the_run_still_fails(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    collected: list[tuple[str, str, int, str]] = []

    class FakeTracker:
        """What an error tracker's capture_exception is to the middleware."""

        async def capture(self, exc: BaseException, job: venturi.JobMeta) -> None:
            collected.append((type(exc).__name__, str(exc), job.id, job.kind))

    @venturi.task(kind="mw_charge", max_failures=1)
    async def charge(ctx: Context[Any], carry: int) -> None:
        if carry:
            raise ValueError(f"card {carry} declined")

    def broken(exc: BaseException, job: venturi.JobMeta) -> None:
        raise OSError("tracker unreachable")

    ok, bad = await charge.enqueue(conn, 0), await charge.enqueue(conn, 7)
    chain = [middleware.report_errors(FakeTracker().capture), middleware.report_errors(broken)]
    w = Worker(None, dsn, [charge], poll_max=0.2, middleware=chain)
    async with running(w):
        await wait_status(conn, ok, "completed")
        await wait_status(conn, bad, "dead")
    assert collected == [("ValueError", "card 7 declined", bad, "mw_charge")]
    job = await venturi.get_job(conn, bad)
    # The broken reporter changed nothing: the handler's own error is the job's.
    assert job is not None and "ValueError: card 7 declined" in (job.last_error or "")
