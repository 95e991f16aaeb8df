"""oban (https://pypi.org/project/oban/, the Oban team's Python port; Python >= 3.12) as a
system under test: its client and its worker, through its public API, in its fastest
documented configuration for no-op async jobs.

oban documents no tuning beyond the queue's ``limit`` (its concurrency), the queue's
``debounce_interval`` (a cooldown between fetches, 5 ms by default, raised in its docs'
example only to slow a queue down) and the pool's size (10 by default, "comfortable for
most deployments"). So the worker is embedded mode as its docs show it: ``Oban(pool=...,
queues={"bench": N})`` on the worker process's event loop, an ``async def process``
worker (run on that loop, no thread per job), the pool of ``Oban.create_pool``, and its
defaults: a LISTEN/NOTIFY notifier that the insert statement signals (no polling delay
for new jobs), the 5 ms debounce, leadership, stager, lifeline and pruner on. The open
source edition inserts and acknowledges jobs one statement each (bulk inserts and bulk
acking are Oban Pro's): ``enqueue_many`` runs one INSERT per job in one transaction.
"""

from __future__ import annotations

import asyncio
from typing import Any

from oban import Oban
from oban import worker as oban_worker

from benchmarks import probe

QUEUE = "bench"


@oban_worker(queue=QUEUE)
class ObanNoop:
    """The handler: oban finds it by name in its registry (this module is imported by the
    worker process before the queue starts)."""

    async def process(self, job: Any) -> None:
        probe.report(job.args["i"])


class Client:
    name = "oban"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.pool: Any = None
        self.oban: Any = None

    async def open(self) -> None:
        self.pool = await Oban.create_pool(self.dsn, min_size=1, max_size=2)
        # No queues: client mode, enqueue only (no leadership, no producers).
        self.oban = Oban(pool=self.pool, name="bench-client")

    async def close(self) -> None:
        await self.pool.close()

    async def _execute(self, query: str) -> Any:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query)
            return await cur.fetchone() if cur.description else None

    async def install(self) -> None:
        from oban.schema import install

        await install(self.pool)

    async def reset(self) -> None:
        await self._execute("TRUNCATE oban_jobs")

    async def analyze(self) -> None:
        await self._execute("ANALYZE oban_jobs")

    # ObanNoop.new: @oban_worker adds it to the class at runtime, and mypy keeps a decorated
    # class's own type (attr-defined), with oban installed or not.
    async def enqueue_one(self, i: int) -> None:
        await self.oban.enqueue(ObanNoop.new({"i": i}))  # type: ignore[attr-defined]

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await self.oban.enqueue_many(
            [
                ObanNoop.new({"i": i})  # type: ignore[attr-defined]
                for i in range(start, start + n)
            ]
        )

    async def unfinished(self) -> int:
        row = await self._execute(
            "SELECT count(*) FROM oban_jobs "
            "WHERE state IN ('available', 'scheduled', 'executing', 'retryable')"
        )
        return int(row[0])


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    pool = await Oban.create_pool(dsn)
    try:
        async with Oban(pool=pool, queues={QUEUE: cfg["concurrency"]}):
            await stop.wait()
    finally:
        await pool.close()
