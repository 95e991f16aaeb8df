"""procrastinate (https://pypi.org/project/procrastinate/) as a system under test: its
client (``PsycopgConnector``, one connection) and its worker, ``run_worker_async`` with
``listen_notify`` and the connector's default pool (4 connections, which drained fastest
here)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from benchmarks import probe
from benchmarks.probe import KIND


def _procrastinate_app(dsn: str, pool_size: int | None = None) -> Any:
    import procrastinate

    # Without a size, psycopg_pool's default (4 connections), which drained fastest here.
    # Any: the connector's keyword parameters include callables (pool_factory, json_dumps),
    # which **sizes could bind; these sizes go on, in its **kwargs, to psycopg_pool.
    sizes: dict[str, Any] = (
        {} if pool_size is None else {"min_size": pool_size, "max_size": pool_size}
    )
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn, **sizes))

    async def procrastinate_noop(i: int) -> None:
        probe.report(i)

    app.task(name=KIND)(procrastinate_noop)
    return app


class Client:
    name = "procrastinate"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.app: Any = None
        self.task: Any = None

    async def open(self) -> None:
        self.app = _procrastinate_app(self.dsn, 1)
        await self.app.open_async()
        self.task = self.app.tasks[KIND]

    async def close(self) -> None:
        await self.app.close_async()

    async def _execute(self, query: str) -> None:
        await self.app.connector.execute_query_async(query)

    async def install(self) -> None:
        await self.app.schema_manager.apply_schema_async()

    async def reset(self) -> None:
        await self._execute(
            "TRUNCATE procrastinate_jobs, procrastinate_events, "
            "procrastinate_periodic_defers, procrastinate_workers CASCADE"
        )

    async def analyze(self) -> None:
        await self._execute("ANALYZE procrastinate_jobs, procrastinate_events")

    async def enqueue_one(self, i: int) -> None:
        await self.task.defer_async(i=i)

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await self.task.batch_defer_async(*({"i": i} for i in range(start, start + n)))

    async def unfinished(self) -> int:
        row = await self.app.connector.execute_query_one_async(
            "SELECT count(*) AS n FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )
        return int(row["n"])


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    app = _procrastinate_app(dsn, cfg.get("pool_size"))
    async with app.open_async():
        run = asyncio.create_task(
            app.run_worker_async(
                concurrency=cfg["concurrency"],
                wait=True,
                listen_notify=True,
                install_signal_handlers=False,
                delete_jobs=cfg.get("delete_jobs", "never"),
            )
        )
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait([run, waiter], return_when=asyncio.FIRST_COMPLETED)
        # Cancelling run_worker_async is procrastinate's graceful stop.
        run.cancel()
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
