"""The venturi side of the groups scenario (``benchmarks.scenarios.groups``): the no-op
tasks (``gbench_*``), the recorder their handlers report to, the seeding and reset of a
scratch database, the claim explained in a rolled-back transaction, an in-process
``venturi.Worker(concurrency=32)`` run until a condition, a hot group's backlog kept
topped up, and the cold group's enqueue-to-start behind it."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from typing import Any

import asyncpg
import msgspec

import venturi
from benchmarks.common import log, median, percentile
from benchmarks.sql import explain
from benchmarks.sql import statement as bsql
from venturi import sql

CONCURRENCY = 32
BATCH = 32
COLD = "cold"


class Unit(msgspec.Struct):
    i: int


class Recorder:
    """What the handlers saw since ``reset``: starts counted (the ``target``-th sets
    ``done``), per group when ``keep``, and each cold job's enqueue-to-start."""

    def __init__(self) -> None:
        self.reset(0)

    def reset(self, target: int, keep: bool = False) -> None:
        self.count = 0
        self.target = target
        self.keep = keep
        self.done = asyncio.Event()
        self.started = asyncio.Event()  # the first start since ``reset``
        self.t_first: float | None = None
        self.t_target: float | None = None
        self.starts: list[tuple[float, str]] = []
        self.by_group: Counter[str] = Counter()
        self.cold_s: list[float] = []

    def hit(self, job: Any) -> None:
        now = time.monotonic()
        self.count += 1
        if self.t_first is None:
            self.t_first = now
            self.started.set()
        group = job.group or ""
        self.by_group[group] += 1
        if self.keep:
            self.starts.append((now, group))
        if group == COLD:
            self.cold_s.append(time.time() - job.created_at.timestamp())
        if self.count == self.target:
            self.t_target = now
            self.done.set()


RECORD = Recorder()


@venturi.task(kind="gbench_plain")
async def gbench_plain(ctx: venturi.Context[Any], carry: Unit) -> None:
    RECORD.hit(ctx.job)


@venturi.task(kind="gbench_cap1", group_cap=1)
async def gbench_cap1(ctx: venturi.Context[Any], carry: Unit) -> None:
    RECORD.hit(ctx.job)


@venturi.task(kind="gbench_cap5", group_cap=5)
async def gbench_cap5(ctx: venturi.Context[Any], carry: Unit) -> None:
    RECORD.hit(ctx.job)


@venturi.task(kind="gbench_free")
async def gbench_free(ctx: venturi.Context[Any], carry: Unit) -> None:
    RECORD.hit(ctx.job)


# T1's configurations: (name, task, Zipf exponent or None for uniform; "plain": no groups).
def load() -> float:
    return os.getloadavg()[0]


async def reset(conn: asyncpg.Connection) -> None:
    await conn.execute(bsql("jobs_reset"))
    await conn.execute(bsql("groups_reset"))


async def insert(conn: asyncpg.Connection, jobs: list[Any]) -> None:
    """``venturi.enqueue_many`` in batches of 50,000 (a batch of 10,000 or more is a COPY)."""
    for k in range(0, len(jobs), 50_000):
        await venturi.enqueue_many(conn, jobs[k : k + 50_000])


def grouped_args(task: Any, limit: int) -> tuple[Any, ...]:
    return (
        "gbench",
        task.kind,
        60.0,
        0,
        limit,
        uuid.uuid4(),
        task.group_cap,
        None,
        None,
        None,
        True,
        [],  # no completions ride these claims
        [],
        [],
    )


def plain_args(task: Any, limit: int) -> tuple[Any, ...]:
    return ("gbench", [task.kind], [60.0], 0, limit, [], [], [], uuid.uuid4(), True)


async def analyze(conn: asyncpg.Connection) -> None:
    """Statistics on every table the claims read, the groups' too (``groups_analyze``: a
    live queue's autovacuum takes them early; without them the grouped claim is planned
    for an empty groups table)."""
    await conn.execute(sql.statement("maintenance/analyze"))
    await conn.execute(bsql("groups_analyze"))


async def wake_all(conn: asyncpg.Connection, task: Any) -> None:
    """Apply every wake-up the enqueues left (a claim of nothing applies 1,000 a time), as
    the worker's first claims would."""
    while True:
        rows = await conn.fetch(sql.statement("job_claim_grouped"), *grouped_args(task, 0))
        if not rows or not rows[-1]["woken"]:
            return


async def explained(conn: asyncpg.Connection, task: Any, grouped: bool, n: int) -> dict[str, Any]:
    """The claim of a batch of 32 under EXPLAIN (ANALYZE) ``n`` times, each rolled back:
    the mean execution time, per statement and per claimed job."""
    name = "job_claim_grouped" if grouped else "job_claim"
    text = explain(sql.statement(name), "ANALYZE, FORMAT JSON")
    took, claimed = [], []
    for _ in range(n):
        tx = conn.transaction()
        await tx.start()
        try:
            args = grouped_args(task, BATCH) if grouped else plain_args(task, BATCH)
            raw = await conn.fetchval(text, *args)
        finally:
            await tx.rollback()
        plan = (msgspec.json.decode(raw) if isinstance(raw, str | bytes) else raw)[0]
        # The grouped claim adds one summary row (settled = true) to the jobs it claimed.
        claimed.append(int(plan["Plan"].get("Actual Rows", 0)) - (1 if grouped else 0))
        took.append(float(plan["Execution Time"]))
    mean = sum(took) / len(took)
    return {
        "statement": name,
        "mean_ms": mean,
        "claimed": median([float(c) for c in claimed]),
        "mean_ms_per_job": mean / max(median([float(c) for c in claimed]), 1),
    }


async def with_worker(dsn: str, task: Any, until: Any, limit_s: float) -> bool:
    """Run an in-process Worker(concurrency=32) of ``task`` until ``until`` finishes (or
    ``limit_s`` seconds pass: False)."""
    stop = asyncio.Event()
    worker = venturi.Worker(None, dsn, [task], concurrency=CONCURRENCY)
    run = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.wait_for(until, limit_s)
        return True
    except TimeoutError:
        return False
    finally:
        stop.set()
        await run


class Backlog:
    """Keeps each of ``groups`` holding ``size`` pending jobs of ``task``: seeded at once,
    then topped up every 0.2 s by the jobs the handlers have started since."""

    def __init__(self, task: Any, groups: list[str], size: int) -> None:
        self.task = task
        self.groups = groups
        self.size = size
        self.added: Counter[str] = Counter()
        # The most jobs a group was short of its backlog at a top-up: a group that reached
        # ``size`` may have run dry (and restarted at the least virtual time).
        self.short: Counter[str] = Counter()

    async def seed(self, conn: asyncpg.Connection) -> None:
        jobs = [self.task.job(Unit(0), group=g) for g in self.groups for _ in range(self.size)]
        await insert(conn, jobs)
        await wake_all(conn, self.task)
        await analyze(conn)

    async def keep(self, conn: asyncpg.Connection, stop: asyncio.Event) -> None:
        while not stop.is_set():
            jobs: list[Any] = []
            for g in self.groups:
                n = RECORD.by_group[g] - self.added[g]
                self.short[g] = max(self.short[g], n)
                self.added[g] += n
                jobs.extend(self.task.job(Unit(0), group=g) for _ in range(n))
            if jobs:
                await insert(conn, jobs)
            await asyncio.sleep(0.2)


async def _cold_enqueues(conn: asyncpg.Connection, seconds: int) -> None:
    # From the worker's first start on, as DBOS's side waits for its worker's ready line:
    # the first cold job then waits behind the backlog, not for the worker's start-up
    # (sent with the worker's start, it was the slowest of every run: 38-63 ms, where
    # the others' p50 is 8; JOURNAL.md, the sixteenth session).
    await RECORD.started.wait()
    start = time.monotonic()
    for k in range(seconds):
        await gbench_free.enqueue(conn, Unit(k), group=COLD)
        await asyncio.sleep(max(0.0, start + k + 1 - time.monotonic()))
    # Until the last cold job has started (or 10 s more).
    for _ in range(100):
        if len(RECORD.cold_s) >= seconds:
            return
        await asyncio.sleep(0.1)


async def cold_once(dsn: str, conns: Any, backlog: int, seconds: int) -> dict[str, Any]:
    """The cold group's enqueue-to-start behind a hot group held at ``backlog`` pending."""
    conn, refill, enq = conns
    await reset(conn)
    hot = Backlog(gbench_free, ["hot"], backlog)
    await hot.seed(conn)
    RECORD.reset(0)
    stop = asyncio.Event()
    keeper = asyncio.create_task(hot.keep(refill, stop))
    at = load()
    try:
        await with_worker(dsn, gbench_free, _cold_enqueues(enq, seconds), seconds + 60)
    finally:
        stop.set()
        await keeper
    ms = [x * 1000 for x in RECORD.cold_s]
    found = {
        "backlog": backlog,
        "cold_jobs": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms, default=float("nan")),
        "hot_started": RECORD.by_group["hot"],
        "hot_short_max": hot.short["hot"],
        "load": at,
        # Each cold job's enqueue-to-start, kept so that runs can be pooled later (a p99
        # of 180 jobs is the second slowest: JOURNAL.md, the sixteenth session).
        "cold_ms": [round(x, 3) for x in ms],
    }
    log(f"  T2 cold behind {backlog:,}: p50 {found['p50_ms']:.0f} ms, p99 {found['p99_ms']:.0f} ms")
    return found


async def venturi_drain(conn: Any, dsn: str, n: int, g: int, limit_s: float) -> dict[str, Any]:
    """N jobs over g groups of the group_cap=1 kind, drained to the end."""
    await reset(conn)
    task = gbench_cap1
    await insert(conn, [task.job(Unit(i), group=f"g{i % g}") for i in range(n)])
    await wake_all(conn, task)
    await analyze(conn)
    RECORD.reset(n)
    at = load()
    done = await with_worker(dsn, task, RECORD.done.wait(), limit_s)
    r = RECORD
    ran = n if done else r.count
    end = r.t_target if done else time.monotonic()
    rate = (ran - 1) / (end - r.t_first) if r.t_first and end and ran > 1 else 0.0
    log(f"  venturi drain {n:,} over {g:,} groups: {rate:,.0f} jobs/s")
    return {"system": "venturi", "jobs_per_s": rate, "ran": ran, "cut": not done, "load": at}
