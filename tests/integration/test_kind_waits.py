"""Why a pending job waits on its kind (SPEC 13, issue 37 item 5): ``venturi jobs show``
and the dashboard's job page say when its kind is at its cap on every live worker that
runs it, at its global cap, or run by no live worker, from the limits each worker run
registered (migration 20)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_status
from tests.support.cli import venturi_cli
from venturi import Context, admin, db
from venturi.runtime.worker import Worker


async def _waits(conn: asyncpg.Connection, job_id: int) -> str | None:
    detail = await admin.show_job(conn, job_id)
    assert detail is not None
    return detail.kind_waits


def _blocking(kind: str, gate: asyncio.Event, **limits: Any) -> venturi.Task[Item]:
    @venturi.task(kind=kind, **limits)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        await gate.wait()

    return handler


async def test_a_kind_at_its_cap_on_its_only_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    task = _blocking("kw_capped", gate, cap=1)
    first, second = await venturi.enqueue_many(conn, [task.job(Item(1)), task.job(Item(2))])
    worker = Worker(None, dsn, [task], concurrency=4, poll_max=0.2, claimed_by="kw1")
    async with running(worker):
        await wait_status(conn, first, "claimed")
        assert await _waits(conn, second) == (
            "kind at its cap on every live worker that runs it (1)"
        )
        assert await _waits(conn, first) is None  # claimed: it does not wait
        gate.set()
        await wait_status(conn, second, "completed")


async def test_a_kind_at_its_global_cap_across_two_workers(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    task = _blocking("kw_global", gate, global_cap=1)
    first, second = await venturi.enqueue_many(conn, [task.job(Item(1)), task.job(Item(2))])
    workers = [
        Worker(None, dsn, [task], concurrency=4, poll_max=0.2, claimed_by=f"kw{i}")
        for i in range(2)
    ]
    async with running(workers[0]), running(workers[1]):
        await wait_status(conn, first, "claimed")
        assert await _waits(conn, second) == "kind at its global cap (1 claimed of 1)"
        gate.set()
        await wait_status(conn, second, "completed")


async def test_room_on_a_worker_says_nothing_and_a_worker_from_before_counts_as_uncapped(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    gate = asyncio.Event()
    task = _blocking("kw_room", gate)
    # A worker with one slot, busy: the kind has room, the worker does not; the job
    # waits for a slot, not for a limit of its kind.
    first, second = await venturi.enqueue_many(conn, [task.job(Item(1)), task.job(Item(2))])
    worker = Worker(None, dsn, [task], concurrency=1, poll_max=0.2, claimed_by="kw1")
    async with running(worker):
        await wait_status(conn, first, "claimed")
        assert await _waits(conn, second) is None
        gate.set()
        await wait_status(conn, second, "completed")
    # A live row without limits (a worker from before migration 20) holding a claim.
    me = db.Claimant("old")
    await db.workers.worker_register(
        conn, schema="venturi", id=me.token, name="old", host="h", pid=1,
        kinds=["kw_room"], concurrency=1, version="0.0",
    )  # fmt: skip
    [job] = await venturi.enqueue_many(conn, [task.job(Item(3))])
    assert await _waits(conn, job) is None


async def test_no_live_worker_and_a_job_not_yet_due(dsn: str, conn: asyncpg.Connection) -> None:
    @venturi.task(kind="kw_nobody")
    async def nobody(ctx: Context[Any], carry: Item) -> None:
        return None

    [due] = await venturi.enqueue_many(conn, [nobody.job(Item(1))])
    [later] = await venturi.enqueue_many(conn, [nobody.job(Item(2), after=timedelta(hours=1))])
    assert await _waits(conn, due) == "no live worker runs its kind"
    assert await _waits(conn, later) is None  # it waits for its time
    # A stopped worker's row does not count.
    gone = uuid.uuid4()
    await db.workers.worker_register(
        conn, schema="venturi", id=gone, name="gone", host="h", pid=1,
        kinds=["kw_nobody"], concurrency=1, version="0.0", caps=[None], global_caps=[None],
    )  # fmt: skip
    await db.workers.worker_stop(conn, schema="venturi", id=gone)
    assert await _waits(conn, due) == "no live worker runs its kind"
    shown = venturi_cli("jobs", "show", str(due), dsn=dsn).stdout
    assert "no live worker runs its kind" in shown
    data = json.loads(venturi_cli("jobs", "show", str(due), "--json", dsn=dsn).stdout)
    assert data["kind_waits"] == "no live worker runs its kind"
