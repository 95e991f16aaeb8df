"""The three systems under test, each driven through its own public API.

For every system there are two halves:

- a *client* the harness process uses to install the schema, empty the tables between
  measurements, and enqueue jobs (single and bulk), through the library's own enqueue
  API and its own recommended driver (asyncpg for venturi and pgqueuer, psycopg 3 for
  procrastinate);
- a *worker runner* that ``benchmarks.worker_proc`` runs in a subprocess, so that each
  worker's CPU time and peak RSS are its own.

Every job is a no-op whose payload is an integer ``i``; the handler only reports
``i`` to a probe (``set_probe``) that counts jobs and timestamps them.

The only SQL text written here is the peers' and venturi's housekeeping between
measurements (TRUNCATE, ANALYZE, a count for the sanity check): venturi's own statements
come from ``venturi.sql``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

import asyncpg
import msgspec

import venturi
from venturi import db, sql

KIND = "bench_noop"

# --- the probe the handlers report to (set by the worker subprocess) ---------------

_probe: Callable[[int], None] = lambda _i: None  # noqa: E731


def set_probe(fn: Callable[[int], None]) -> None:
    global _probe
    _probe = fn


def report(i: int) -> None:
    """A handler's report, for the systems that import their handlers from elsewhere
    (chancy loads its jobs by import path)."""
    _probe(i)


_begin: Callable[[], None] = lambda: None  # noqa: E731


def set_begin(fn: Callable[[], None]) -> None:
    global _begin
    _begin = fn


def begin() -> None:
    """Work has begun (benchmarks.workflows: a workflow's first step started); the probe
    keeps the first instant."""
    _begin()


# --- venturi ------------------------------------------------------------------------


class Noop(msgspec.Struct):
    i: int


@venturi.task(kind=KIND)
async def venturi_noop(ctx: venturi.Context[Any], carry: Noop) -> None:
    _probe(carry.i)


class VenturiClient:
    name = "venturi"
    schema = sql.DEFAULT_SCHEMA

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)

    async def close(self) -> None:
        await self.conn.close()

    async def install(self) -> None:
        await db.schema.apply_schema(self.conn, schema=self.schema)

    async def reset(self) -> None:
        # CASCADE: the workflow tables (steps, signals, dependencies) refer to jobs.
        await self.conn.execute(
            f"TRUNCATE {self.schema}.jobs, {self.schema}.journal, {self.schema}.job_search CASCADE"
        )
        # The search index's watermark back to the start (migration 16): nothing indexed.
        await self.conn.execute(
            f"UPDATE {self.schema}.job_search_state SET indexed_at = '-infinity', indexed_id = 0"
        )

    async def analyze(self) -> None:
        await self.conn.execute(sql.statement("maintenance/analyze", self.schema))

    async def enqueue_one(self, i: int) -> None:
        await venturi_noop.enqueue(self.conn, Noop(i))

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await venturi.enqueue_many(
            self.conn, [venturi_noop.job(Noop(i)) for i in range(start, start + n)]
        )

    async def unfinished(self) -> int:
        rows = await db.reads.job_counts(self.conn, schema=self.schema)
        return sum(r["jobs"] for r in rows if r["status"] in ("pending", "claimed"))


class VenturiPsycopgClient:
    """venturi's enqueue through psycopg 3 (an ``AsyncConnection``, autocommit as the
    asyncpg client is, so each call is its own transaction), on venturi's database: the
    driver seam's path beside asyncpg's, and the driver procrastinate enqueues with. Only
    enqueues: the database's housekeeping is ``VenturiClient``'s."""

    name = "venturi-psycopg"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None

    async def open(self) -> None:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def close(self) -> None:
        await self.conn.close()

    async def enqueue_one(self, i: int) -> None:
        await venturi_noop.enqueue(self.conn, Noop(i))

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await venturi.enqueue_many(
            self.conn, [venturi_noop.job(Noop(i)) for i in range(start, start + n)]
        )


def history_task() -> Any:
    """``venturi.maintenance.History`` (moves finished jobs to the history table), or None
    where this venturi has none (before the history table)."""
    try:
        from venturi import maintenance
    except ImportError:
        return None
    found = getattr(maintenance, "History", None)
    if found is None:
        try:
            from venturi.maintenance import history
        except ImportError:
            return None
        found = getattr(history, "History", None)
    return found


async def venturi_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    # benchmarks.steady runs retention beside the loop, as a production worker would.
    maintenance: list[Any] = []
    # benchmarks.search_index_ab: the dashboard's search index pass beside the loop, as
    # `venturi worker` runs it.
    if os.environ.get("VENTURI_BENCH_SEARCH_INDEX") == "1":
        from venturi.maintenance import SearchIndex

        maintenance.append(SearchIndex())
    if cfg.get("retention_s") is not None:
        maintenance.append(
            venturi.Retention(completed=cfg["retention_s"], interval=cfg.get("retention_every", 10))
        )
    # benchmarks.steady --history: finished jobs moved from the hot table to the history
    # table beside retention (where venturi has the task; the harness checks first).
    if cfg.get("history"):
        history = history_task()
        if history is None:
            raise SystemExit("benchmarks: this venturi has no venturi.maintenance.History")
        maintenance.append(
            history(interval=cfg.get("history_every", 1.0), batch=cfg.get("history_batch", 5000))
        )
    # benchmarks.steady --vacuum-task: the live table's Vacuum, as `venturi worker` runs it.
    if cfg.get("vacuum_task"):
        from venturi.maintenance import Vacuum

        maintenance.append(Vacuum(interval=cfg.get("vacuum_every", 5.0)))
    # benchmarks.compare --no-synchronous-commit: Worker(synchronous_commit=False), passed
    # only then, so that a venturi older than the knob runs the default.
    extra: dict[str, Any] = {}
    if cfg.get("synchronous_commit") is False:
        extra["synchronous_commit"] = False
    worker = venturi.Worker(
        None, dsn, [venturi_noop], concurrency=cfg["concurrency"], maintenance=maintenance, **extra
    )
    await worker.run(stop)


# --- procrastinate ------------------------------------------------------------------


def _procrastinate_app(dsn: str, pool_size: int | None = None) -> Any:
    import procrastinate

    # Without a size, psycopg_pool's default (4 connections), which drained fastest here.
    sizes = {} if pool_size is None else {"min_size": pool_size, "max_size": pool_size}
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn, **sizes))

    async def procrastinate_noop(i: int) -> None:
        _probe(i)

    app.task(name=KIND)(procrastinate_noop)
    return app


class ProcrastinateClient:
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


async def procrastinate_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
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


# --- pgqueuer -----------------------------------------------------------------------


class PgqueuerClient:
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


async def pgqueuer_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from pgqueuer import AsyncpgDriver, Job, PgQueuer
    from pgqueuer.domain.types import QueueExecutionMode

    async def pgqueuer_noop(job: Job) -> None:
        _probe(int(job.payload or b"0"))

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


# --- chancy, dbos and oban, each in a module of its own (imported when used) --------


def _chancy_client(dsn: str) -> Any:
    from benchmarks.chancy_system import ChancyClient

    return ChancyClient(dsn)


async def _chancy_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from benchmarks.chancy_system import chancy_worker

    await chancy_worker(dsn, cfg, stop)


def _dbos_client(dsn: str) -> Any:
    from benchmarks.dbos_system import DbosClient

    return DbosClient(dsn)


async def _dbos_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from benchmarks.dbos_system import dbos_worker

    await dbos_worker(dsn, cfg, stop, _probe)


async def _workflow_worker(system: str, dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    """benchmarks.workflows' workers (``<system>-wf``), imported when used."""
    if system == "venturi":
        from benchmarks.wf_venturi import venturi_workflow_worker

        await venturi_workflow_worker(dsn, cfg, stop)
    elif system == "chancy":
        from benchmarks.wf_chancy import chancy_workflow_worker

        await chancy_workflow_worker(dsn, cfg, stop)
    else:
        from benchmarks.wf_dbos import dbos_workflow_worker

        await dbos_workflow_worker(dsn, cfg, stop)


def _oban_client(dsn: str) -> Any:
    from benchmarks.oban_system import ObanClient

    return ObanClient(dsn)


async def _oban_worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from benchmarks.oban_system import oban_worker

    await oban_worker(dsn, cfg, stop)


CLIENTS: dict[str, Callable[[str], Any]] = {
    "venturi": VenturiClient,
    "procrastinate": ProcrastinateClient,
    "pgqueuer": PgqueuerClient,
    "chancy": _chancy_client,
    "dbos": _dbos_client,
    "oban": _oban_client,
}

WORKERS: dict[str, Callable[[str, dict[str, Any], asyncio.Event], Any]] = {
    "venturi": venturi_worker,
    "procrastinate": procrastinate_worker,
    "pgqueuer": pgqueuer_worker,
    "chancy": _chancy_worker,
    "dbos": _dbos_worker,
    **{
        f"{name}-wf": functools.partial(_workflow_worker, name)
        for name in ("venturi", "chancy", "dbos")
    },
    "oban": _oban_worker,
}
