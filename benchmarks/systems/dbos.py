"""DBOS Transact's queues (https://pypi.org/project/dbos/) as a system under test.

A job is a queued workflow (``@DBOS.workflow``, async, a no-op); the worker is a launched
DBOS process whose queue has ``worker_concurrency`` = the concurrency level. Its fastest
documented configuration for this: LISTEN/NOTIFY on (its default), and the queue's
``polling_interval_sec`` (how often its queue thread looks for runnable workflows, 1 s by
default) lowered to 10 ms, since a DBOS queue is polled, not woken by an enqueue.
Enqueue goes through ``DBOSClient`` (the API for enqueueing from outside the
application): one ``enqueue`` per job, and a batch as ``enqueue_in_transaction`` calls in
one SQLAlchemy transaction (DBOS has no batch enqueue).

DBOS runs async workflows on an event loop of its own thread, so the handler hands its
report to the worker's loop (``call_soon_threadsafe``): the probe's timestamp is taken
there, a few microseconds after the handler ran.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import probe

QUEUE = "bench"
WORKFLOW = "bench_noop"
APP = "venturi_bench"
POLL = 0.01


def _url(dsn: str) -> str:
    """DBOS's SQLAlchemy engine wants a driver in the URL (psycopg 3)."""
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


def _registered() -> Any:
    from dbos import DBOS

    @DBOS.workflow(name=WORKFLOW)
    async def bench_noop(i: int) -> None:
        probe.report(i)

    return bench_noop


class Client:
    name = "dbos"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.client: Any = None
        self.engine: Any = None

    async def open(self) -> None:
        import sqlalchemy as sa
        from dbos import DBOSClient

        self.client = await asyncio.to_thread(
            DBOSClient, system_database_url=self.dsn, application_name=APP
        )
        self.engine = sa.create_engine(_url(self.dsn), pool_size=2)

    async def close(self) -> None:
        await asyncio.to_thread(self.client.destroy)
        self.engine.dispose()

    def _sql(self, query: str) -> Any:
        import sqlalchemy as sa

        with self.engine.begin() as conn:
            result = conn.execute(sa.text(query))
            return result.scalar() if result.returns_rows else None

    async def install(self) -> None:
        # The client never migrates; DBOS's own CLI does, as a deployment would.
        exe = Path(sys.executable).with_name("dbos")
        await asyncio.to_thread(
            subprocess.run, [str(exe), "migrate", "-s", self.dsn], check=True, capture_output=True
        )

    async def reset(self) -> None:
        await asyncio.to_thread(self._sql, "TRUNCATE dbos.workflow_status CASCADE")

    async def analyze(self) -> None:
        await asyncio.to_thread(self._sql, "ANALYZE dbos.workflow_status")

    def _options(self, partition: str | None = None) -> Any:
        options = {"queue_name": QUEUE, "workflow_name": WORKFLOW, "application_name": APP}
        if partition is not None:
            # A partitioned queue (partition_concurrency) wants a key on every enqueue.
            options["queue_partition_key"] = partition
        return options

    async def enqueue_one(self, i: int) -> None:
        await self.client.enqueue_async(self._options(), i)

    def _enqueue_bulk(self, start: int, n: int) -> None:
        with self.engine.begin() as conn:
            for i in range(start, start + n):
                self.client.enqueue_in_transaction(conn, self._options(), i)

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await asyncio.to_thread(self._enqueue_bulk, start, n)

    async def enqueue_keyed(self, i: int, partition: str) -> None:
        """Job ``i`` in partition ``partition`` of a partitioned queue."""
        await self.client.enqueue_async(self._options(partition), i)

    def _enqueue_partitioned(self, items: list[tuple[int, str]]) -> None:
        with self.engine.begin() as conn:
            for i, partition in items:
                self.client.enqueue_in_transaction(conn, self._options(partition), i)

    async def enqueue_partitioned(self, items: list[tuple[int, str]]) -> None:
        """Jobs ``(i, partition key)`` in one transaction (the ``enqueue_bulk`` way)."""
        await asyncio.to_thread(self._enqueue_partitioned, items)

    async def unfinished(self) -> int:
        n = await asyncio.to_thread(
            self._sql,
            "SELECT count(*) FROM dbos.workflow_status WHERE status IN ('ENQUEUED', 'PENDING')",
        )
        return int(n)


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from dbos import DBOS

    probe.hand_over(asyncio.get_running_loop())
    logging.getLogger("dbos").setLevel(logging.WARNING)
    _registered()

    # A partitioned queue (benchmarks.scenarios.groups): at most this many workflows of
    # one partition key running at once, across every process.
    partitioned = {}
    if cfg.get("partition_concurrency"):
        partitioned["partition_concurrency"] = cfg["partition_concurrency"]

    def start() -> None:
        # DBOS's synchronous API refuses a thread with a running event loop.
        DBOS(config={"name": APP, "system_database_url": dsn, "log_level": "WARNING"})
        DBOS.launch()
        DBOS.register_queue(
            QUEUE,
            worker_concurrency=cfg["concurrency"],
            polling_interval_sec=cfg.get("polling_interval_sec", POLL),
            on_conflict="always_update",
            **partitioned,
        )

    await asyncio.to_thread(start)
    try:
        await stop.wait()
    finally:
        await asyncio.to_thread(DBOS.destroy)
