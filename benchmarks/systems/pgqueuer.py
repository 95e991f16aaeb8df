"""pgqueuer (https://pypi.org/project/pgqueuer/) as a system under test: its client
(``Queries`` on one asyncpg connection) and its worker, ``cfg["consumers"]`` PgQueuer
instances of ``batch_size`` (and ``max_concurrent_tasks``) each, in drain or continuous
mode."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from benchmarks import probe
from benchmarks.probe import KIND


class Client:
    name = "pgqueuer"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None
        self.queries: Any = None

    async def open(self) -> None:
        from pgqueuer import AsyncpgDriver, Queries

        self.conn = await asyncpg.connect(self.dsn)
        self.queries = Queries(AsyncpgDriver(self.conn))

    async def close(self) -> None:
        await self.conn.close()

    async def install(self) -> None:
        await self.queries.install()

    async def reset(self) -> None:
        await self.queries.clear_queue()
        await self.queries.clear_queue_log()
        await self.queries.clear_statistics_log()

    async def analyze(self) -> None:
        await self.conn.execute("ANALYZE pgqueuer, pgqueuer_log")

    async def enqueue_one(self, i: int) -> None:
        await self.queries.enqueue(KIND, str(i).encode(), 0)

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await self.queries.enqueue(
            [KIND] * n, [str(i).encode() for i in range(start, start + n)], [0] * n
        )

    async def unfinished(self) -> int:
        return sum(s.count for s in await self.queries.queue_size())


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from pgqueuer import AsyncpgDriver, Job, PgQueuer
    from pgqueuer.domain.types import QueueExecutionMode

    async def pgqueuer_noop(job: Job) -> None:
        probe.report(int(job.payload or b"0"))

    conns = [await asyncpg.connect(dsn) for _ in range(cfg["consumers"])]
    pgqs = []
    for conn in conns:
        pgq = PgQueuer(AsyncpgDriver(conn))
        pgq.entrypoint(KIND)(pgqueuer_noop)
        pgqs.append(pgq)
    mode = QueueExecutionMode.drain if cfg.get("drain") else QueueExecutionMode.continuous
    runs = [
        asyncio.create_task(
            pgq.run(
                batch_size=cfg["batch_size"],
                max_concurrent_tasks=cfg.get("max_concurrent_tasks"),
                mode=mode,
            )
        )
        for pgq in pgqs
    ]
    waiter = asyncio.create_task(stop.wait())
    pending = {*runs, waiter}
    # In drain mode a consumer returns once the queue looks empty; keep going until
    # every consumer has returned or the probe has seen enough jobs.
    while waiter in pending and (pending - {waiter}):
        _done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    for pgq in pgqs:
        pgq.shutdown.set()
    waiter.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    for conn in conns:
        await conn.close()
