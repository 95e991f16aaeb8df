"""Alerts: thresholds on queue depth, oldest pending age and error rate, delivered to a
webhook on 127.0.0.1 once per cooldown however many workers check, retried after a
failed delivery, bounded by a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_for, wait_status
from venturi import Alerts, Context
from venturi.maintenance.alerts import Alert
from venturi.runtime.worker import Worker


class Webhook:
    """A tiny HTTP server on 127.0.0.1 that records each request and answers with the
    next status of ``statuses`` (200 once they run out), or never, while ``hang``."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.statuses: list[int] = []
        self.hang = False
        self.release = asyncio.Event()
        self.url = ""
        self._writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        request_line = (await reader.readline()).decode()
        headers = {}
        while (line := (await reader.readline()).decode().strip()) != "":
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        await self.received.put(
            {"request": request_line.split()[:2], "headers": headers, "body": json.loads(body)}
        )
        if self.hang:
            await self.release.wait()
        status = self.statuses.pop(0) if self.statuses else 200
        writer.write(
            f"HTTP/1.1 {status} Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        with contextlib.suppress(ConnectionError):  # a client that gave up waiting
            await writer.drain()
        writer.close()

    def count(self) -> int:
        return self.received.qsize()


@pytest.fixture
async def webhook(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Webhook]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    hook = Webhook()
    server = await asyncio.start_server(hook.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hook.url = f"http://127.0.0.1:{port}/alerts"
    try:
        yield hook
    finally:
        hook.release.set()
        server.close()
        for w in hook._writers:
            w.close()
        await server.wait_closed()


def _declare(kind: str, **options: Any) -> venturi.Task[Any]:
    @venturi.task(kind=kind, **options)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        if carry.n % 2:
            raise RuntimeError("odd")

    return handler


async def test_queue_depth_alert_is_posted_once_per_cooldown(
    pool: asyncpg.Pool, conn: asyncpg.Connection, webhook: Webhook, kinds: list[str]
) -> None:
    deep, other = _declare("al_deep"), _declare("al_other")
    for i in range(5):
        await deep.enqueue(conn, Item(i))
        await other.enqueue(conn, Item(i))
    await deep.enqueue(conn, Item(99), after=3600)  # scheduled for later: not in the depth
    alerts = Alerts(webhook.url, queue_depth={"al_deep": 3})
    worker = Worker(None, pool, [deep])
    await alerts.run(pool, worker)
    sent = webhook.received.get_nowait()
    assert sent["request"] == ["POST", "/alerts"]
    assert sent["headers"]["content-type"] == "application/json"
    body = sent["body"]
    assert (body["alert"], body["kind"], body["value"], body["threshold"]) == (
        "queue_depth",
        "al_deep",
        5.0,
        3.0,
    )
    assert body["schema"] == "venturi" and "al_deep" in body["message"]
    assert worker.stats["alerts_sent"] == 1
    # Still over the threshold, but within the cooldown: nothing more.
    await alerts.run(pool, worker)
    await Alerts(webhook.url, queue_depth={"al_deep": 3}).run(pool, worker)  # a restart
    assert webhook.count() == 0 and worker.stats["alerts_sent"] == 1
    # No cooldown: every check delivers again.
    await Alerts(webhook.url, queue_depth=3, kinds=["al_other"], cooldown=0).run(pool, worker)
    assert webhook.received.get_nowait()["body"]["kind"] == "al_other"


async def test_many_workers_deliver_an_alert_once(
    pool: asyncpg.Pool, conn: asyncpg.Connection, webhook: Webhook, kinds: list[str]
) -> None:
    task = _declare("al_many")
    for i in range(4):
        await task.enqueue(conn, Item(i))
    workers = [Worker(None, pool, [task]) for _ in range(6)]
    await asyncio.gather(*(Alerts(webhook.url, queue_depth=1).run(pool, w) for w in workers))
    assert webhook.count() == 1
    assert sum(w.stats["alerts_sent"] for w in workers) == 1


async def test_a_failed_delivery_is_retried_after_retry_after(
    pool: asyncpg.Pool, conn: asyncpg.Connection, webhook: Webhook, kinds: list[str]
) -> None:
    task = _declare("al_retry")
    await task.enqueue(conn, Item(0), at=datetime.now(UTC) - timedelta(hours=1))
    webhook.statuses = [500]
    alerts = Alerts(webhook.url, oldest_pending=60, retry_after=0.5)
    worker = Worker(None, pool, [task])
    failed_at = time.monotonic()
    await alerts.run(pool, worker)
    assert (await webhook.received.get())["body"]["alert"] == "oldest_pending"
    assert worker.stats["alerts_failed"] == 1 and worker.stats["alerts_sent"] == 0
    await alerts.run(pool, worker)  # at once: held for retry_after
    assert webhook.count() == 0

    async def delivered() -> bool:
        await alerts.run(pool, worker)
        return worker.stats["alerts_sent"] == 1

    await wait_for(delivered)
    assert time.monotonic() - failed_at >= 0.5
    retried = webhook.received.get_nowait()["body"]
    assert retried["alert"] == "oldest_pending" and retried["value"] >= 3600


async def test_an_unanswered_webhook_times_out(
    pool: asyncpg.Pool, conn: asyncpg.Connection, webhook: Webhook, kinds: list[str]
) -> None:
    task = _declare("al_hang")
    await task.enqueue(conn, Item(0))
    webhook.hang = True
    worker = Worker(None, pool, [task])
    # The webhook never answers: without its timeout the run would never return.
    await asyncio.wait_for(Alerts(webhook.url, queue_depth=0, timeout=0.3).run(pool, worker), 30)
    assert worker.stats["alerts_failed"] == 1
    assert webhook.count() == 1  # it was asked; it never answered


async def test_unreachable_webhook_is_a_failed_delivery(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("al_refused")
    await task.enqueue(conn, Item(0))
    worker = Worker(None, pool, [task])
    # Port 9 on 127.0.0.1 (discard) has no listener here: connection refused.
    await Alerts("http://127.0.0.1:9/", queue_depth=0, timeout=2).run(pool, worker)
    assert worker.stats["alerts_failed"] == 1


async def test_error_rate_needs_enough_executions(
    dsn: str, pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("al_errors", max_failures=1)
    ids = [await task.enqueue(conn, Item(i)) for i in range(6)]  # odd ones fail: 3 of 6
    runner = Worker(None, dsn, [task], poll_max=0.1)
    async with running(runner):
        for i, job_id in enumerate(ids):
            await wait_status(conn, job_id, "dead" if i % 2 else "completed")
    seen: list[Alert] = []

    async def hook(alert: Alert) -> None:
        seen.append(alert)

    worker = Worker(None, pool, [task])
    await Alerts(hook=hook, error_rate=0.4, min_executions=7).run(pool, worker)
    await Alerts(hook=hook, error_rate=0.6, min_executions=6).run(pool, worker)
    assert seen == []
    await Alerts(hook=hook, error_rate=0.4, min_executions=6).run(pool, worker)
    [alert] = seen
    assert (alert.alert, alert.kind, alert.value, alert.threshold) == (
        "error_rate",
        "al_errors",
        0.5,
        0.4,
    )


async def test_worker_checks_alerts_as_maintenance(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("al_maint")
    idle = _declare("al_idle")  # no worker runs it: its jobs pile up
    got = asyncio.Event()
    seen: list[Alert] = []

    def hook(alert: Alert) -> None:  # a plain function runs in a thread
        seen.append(alert)
        loop.call_soon_threadsafe(got.set)

    loop = asyncio.get_running_loop()
    alerts = Alerts(hook=hook, queue_depth=2, interval=0.05)
    worker = Worker(None, dsn, [task], poll_max=0.1, maintenance=[alerts])
    async with running(worker):
        for i in range(3):
            await idle.enqueue(conn, Item(i))
        await asyncio.wait_for(got.wait(), 15)
        await wait_for(lambda: _sent(worker))
    assert [(a.alert, a.kind) for a in seen] == [("queue_depth", "al_idle")]
    assert worker.stats["alerts_sent"] == 1


async def _sent(worker: Worker[Any]) -> bool:
    return worker.stats["alerts_sent"] >= 1


async def test_a_failing_hook_is_a_failed_delivery(
    pool: asyncpg.Pool, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    task = _declare("al_hookfail")
    await task.enqueue(conn, Item(0))

    async def hook(alert: Alert) -> None:
        raise RuntimeError("pager down")

    alerts = Alerts(hook=hook, queue_depth=0)
    worker = Worker(None, pool, [task])
    assert await alerts.deliver(_sample()) == "hook: RuntimeError: pager down"
    await alerts.run(pool, worker)
    assert worker.stats["alerts_failed"] == 1


def _sample() -> Alert:
    return Alert("queue_depth", "k", 1.0, 0.0, "m", "venturi", datetime.now(UTC))


async def test_a_hook_that_outlives_its_timeout_runs_on_a_daemon_thread() -> None:
    # A sync hook stuck past its timeout runs on in its thread; in asyncio's default
    # executor, a thread the interpreter joins at exit, it kept the process from exiting.
    gate, threads = threading.Event(), []

    def hook(alert: Alert) -> None:
        threads.append(threading.current_thread())
        gate.wait()

    try:
        got = await Alerts(hook=hook, queue_depth=0, timeout=0.2).deliver(_sample())
        assert got == "hook: no return within 0.2s"
        assert [t.daemon for t in threads] == [True]
    finally:
        gate.set()
