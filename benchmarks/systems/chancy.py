"""chancy (https://pypi.org/project/chancy/) as a system under test: its client and its
worker, through its public API, in its fastest documented configuration for no-op async
jobs: the ``AsyncExecutor`` (jobs on the worker's event loop, no process or thread per
job), ``eager_polling`` (fetch again as soon as a job completes, which its docs name for
"jobs expected to be continuously available"), LISTEN/NOTIFY wake-ups (its default), the
shortest polling interval its queue accepts (1 s, an integer), and its default plugins.
Concurrency is the queue's, declared before each worker starts."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from benchmarks import probe

QUEUE = "bench"


async def chancy_noop(*, i: int) -> None:
    """The handler: chancy imports it by its module path in the worker."""
    probe.report(i)


def queue(concurrency: int, name: str = QUEUE) -> Any:
    """The queue in its fastest documented configuration (``chancy_wf``'s too)."""
    from chancy import Chancy, Queue

    return Queue(
        name=name,
        concurrency=concurrency,
        executor=Chancy.Executor.Async,
        polling_interval=1,
        eager_polling=True,
    )


def app(dsn: str, pool: int = 10, **options: Any) -> Any:
    """The application, its default plugins unless ``options`` say otherwise."""
    from chancy import Chancy

    return Chancy(
        dsn,
        max_connection_pool_size=pool,
        log=logging.getLogger("bench.chancy"),
        **options,
    )


def _job(i: int) -> Any:
    from chancy import Job

    return Job.from_func(chancy_noop, queue=QUEUE).with_kwargs(i=i)


class Client:
    name = "chancy"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.app: Any = None

    def _app(self) -> Any:
        return app(self.dsn, pool=2)

    async def open(self) -> None:
        self.app = self._app()
        await self.app.__aenter__()

    async def close(self) -> None:
        await self.app.__aexit__(None, None, None)

    async def _execute(self, query: str) -> Any:
        async with self.app.pool.connection() as conn:
            cur = await conn.execute(query)
            return await cur.fetchone() if cur.description else None

    async def install(self) -> None:
        await self.app.migrate()
        await self.app.declare(queue(1), upsert=True)

    async def reset(self) -> None:
        await self._execute("TRUNCATE chancy_jobs")

    async def analyze(self) -> None:
        await self._execute("ANALYZE chancy_jobs")

    async def enqueue_one(self, i: int) -> None:
        await self.app.push(_job(i))

    async def enqueue_bulk(self, start: int, n: int) -> None:
        async for _refs in self.app.push_many(
            [_job(i) for i in range(start, start + n)], batch_size=n
        ):
            pass

    async def unfinished(self) -> int:
        row = await self._execute(
            "SELECT count(*) FROM chancy_jobs WHERE state IN ('pending', 'running', 'retrying')"
        )
        return int(row[0])


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from chancy import Worker

    logging.getLogger("bench.chancy").setLevel(logging.WARNING)
    async with app(dsn) as chancy:
        # The queue's concurrency is stored in the database: declare this run's.
        await chancy.declare(queue(cfg["concurrency"]), upsert=True)
        async with Worker(chancy, register_signal_handlers=False, shutdown_timeout=10):
            await stop.wait()
