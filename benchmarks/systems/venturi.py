"""venturi as a system under test: its client (schema, housekeeping, enqueue on asyncpg,
and on psycopg 3 for the driver seam's figure) and its worker, ``Worker(concurrency=N)``
with whatever maintenance a scenario asks for in its configuration."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import asyncpg
import msgspec

import venturi
from benchmarks import probe
from benchmarks.probe import KIND
from benchmarks.sql import statement as bsql
from venturi import db, sql


class Noop(msgspec.Struct):
    i: int


@venturi.task(kind=KIND)
async def venturi_noop(ctx: venturi.Context[Any], carry: Noop) -> None:
    probe.report(carry.i)


def noop_jobs(numbers: Iterable[int]) -> list[Any]:
    """The no-op jobs of these numbers, as ``venturi.enqueue_many`` takes them."""
    return [venturi_noop.job(Noop(i)) for i in numbers]


class Client:
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
        await self.conn.execute(bsql("jobs_reset", self.schema))

    async def analyze(self) -> None:
        await self.conn.execute(sql.statement("maintenance/analyze", self.schema))

    async def enqueue_one(self, i: int) -> None:
        await venturi_noop.enqueue(self.conn, Noop(i))

    async def enqueue_bulk(self, start: int, n: int) -> None:
        await venturi.enqueue_many(self.conn, noop_jobs(range(start, start + n)))

    async def unfinished(self) -> int:
        rows = await db.reads.job_counts(self.conn, schema=self.schema)
        return sum(r["jobs"] for r in rows if r["status"] in ("pending", "claimed"))


class PsycopgClient:
    """venturi's enqueue through psycopg 3 (an ``AsyncConnection``, autocommit as the
    asyncpg client is, so each call is its own transaction), on venturi's database: the
    driver seam's path beside asyncpg's, and the driver procrastinate enqueues with. Only
    enqueues: the database's housekeeping is ``Client``'s."""

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
        await venturi.enqueue_many(self.conn, noop_jobs(range(start, start + n)))


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


def maintenance(cfg: dict[str, Any]) -> list[Any]:
    """The maintenance tasks a scenario's worker configuration asks for, beside the loop
    as a production worker runs them: ``retention_s`` (``scenarios.steady``: completed jobs
    deleted after so many seconds), ``history`` (finished jobs moved to the history table,
    where this venturi has the task; the harness checks first) and ``vacuum_task`` (the
    live table's Vacuum, as ``venturi worker`` runs it)."""
    tasks: list[Any] = []
    if cfg.get("retention_s") is not None:
        tasks.append(
            venturi.Retention(completed=cfg["retention_s"], interval=cfg.get("retention_every", 10))
        )
    if cfg.get("history"):
        history = history_task()
        if history is None:
            raise SystemExit("benchmarks: this venturi has no venturi.maintenance.History")
        tasks.append(
            history(interval=cfg.get("history_every", 1.0), batch=cfg.get("history_batch", 5000))
        )
    if cfg.get("vacuum_task"):
        from venturi.maintenance import Vacuum

        tasks.append(Vacuum(interval=cfg.get("vacuum_every", 5.0)))
    return tasks


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    # compare --no-synchronous-commit: Worker(synchronous_commit=False), passed only then,
    # so that a venturi older than the knob runs the default.
    extra: dict[str, Any] = {}
    if cfg.get("synchronous_commit") is False:
        extra["synchronous_commit"] = False
    run = venturi.Worker(
        None,
        dsn,
        [venturi_noop],
        concurrency=cfg["concurrency"],
        maintenance=maintenance(cfg),
        **extra,
    )
    await run.run(stop)
