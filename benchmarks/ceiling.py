"""The raw-SQL ceiling: venturi's own claim and settle statements, no framework.

Each client is one asyncpg connection (prepared statements, autocommit) that loops over
``job_claim`` for up to ``batch`` rows and settles them as completed, in one of two
shapes:

- ``separate``: ``job_claim`` then ``job_complete_many_if_owned`` for the whole batch:
  two statements, two round trips and two commits per batch;
- ``combined``: when ``job_claim`` can carry completions (its ``done_*`` parameters),
  each claim settles the previous batch: one round trip and one commit per batch, the
  shape of the worker's loop.

The statements come from ``venturi.sql.statement``; their bind parameters are matched
by the names declared in each statement's header, so no SQL text is written here. What
the worker adds on top (asyncio tasks, handler dispatch, the pool, the wake-up logic) is
the gap between its drain figure and this one.

``via_pool=True`` runs the same loop through ``asyncpg.Pool.fetch`` (one acquire and
release per statement, as ``venturi.db`` does when handed a pool) to show what the
pool's per-release reset costs.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from benchmarks.common import log
from benchmarks.harness import Bench
from benchmarks.probe import KIND
from venturi import sql
from venturi.backoff import DEFAULT_BACKOFF

# The worker's default lease (venturi.Worker(lease=900.0)).
LEASE = 900.0

# "-- $3 float8[] leases: ..." in a statement's header.
_PARAM = re.compile(r"^-- \$(\d+) +\S+ +(\w+)", re.MULTILINE)


def claimed_rows(rows: list[Any]) -> list[Any]:
    """The claimed jobs among ``job_claim``'s rows, whichever tree's statement answered:
    the completions it returns are ``settled = true`` before 1f3bb79 (those that
    applied) and ``lost = true`` since (those that did not)."""
    if not rows:
        return rows
    keys = rows[0].keys()
    flag = "lost" if "lost" in keys else "settled" if "settled" in keys else None
    return rows if flag is None else [r for r in rows if not r[flag]]


def parameters(name: str, schema: str = sql.DEFAULT_SCHEMA) -> list[str]:
    """The bind parameter names of a venturi statement, in $n order."""
    found = {int(n): p for n, p in _PARAM.findall(sql.statement(name, schema))}
    return [found[i] for i in sorted(found)]


def can_combine(schema: str = sql.DEFAULT_SCHEMA) -> bool:
    return "done_ids" in parameters("job_claim", schema)


def bind(names: Sequence[str], values: dict[str, Any], statement: str) -> list[Any]:
    """The values of ``statement``'s parameters ``names`` (``parameters``), in order."""
    missing = [n for n in names if n not in values]
    if missing:
        raise RuntimeError(
            f"benchmarks.ceiling does not know the parameter(s) {missing} of {statement}; "
            "teach it their values"
        )
    return [values[n] for n in names]


def claim_values(batch: int, claimed_by: str) -> dict[str, Any]:
    """``job_claim``'s parameters as the worker binds them for a claim of up to ``batch``
    no-op jobs with nothing to settle (``done_*`` empty); ``bind`` orders them."""
    b = DEFAULT_BACKOFF
    return {
        "kinds": [KIND],
        "leases": [LEASE],
        "priority_floor": 0,
        "claim_limit": batch,
        "backoff_base": b.base,
        "backoff_factor": b.factor,
        "backoff_cap": b.cap,
        "backoff_jitter": b.jitter,
        "claimed_by": claimed_by,
        "claim_token": uuid.uuid4(),
        "synchronous_commit": True,
        "done_ids": [],
        "done_attempts": [],
        "done_results": [],
    }


async def run(
    dsn: str,
    *,
    clients: int,
    batch: int,
    duration: float,
    shape: str = "separate",
    via_pool: bool = False,
    schema: str = sql.DEFAULT_SCHEMA,
) -> dict[str, Any]:
    """Claim and settle for ``duration`` seconds; returns jobs/s and round trips."""
    if shape not in ("separate", "combined"):
        raise ValueError(f"shape must be separate or combined, got {shape!r}")
    claim = sql.statement("job_claim", schema)
    claim_params = parameters("job_claim", schema)
    settle = sql.statement("job_complete_many_if_owned", schema) if shape == "separate" else ""
    settle_params = parameters("job_complete_many_if_owned", schema) if settle else []
    pool: Any = None
    conns: list[Any] = []
    if via_pool:
        pool = await asyncpg.create_pool(dsn, min_size=clients, max_size=clients)
        targets: list[Any] = [pool] * clients
    else:
        conns = [await asyncpg.connect(dsn) for _ in range(clients)]
        targets = conns
    # Prepare outside the timed window (asyncpg caches prepared statements per connection).
    for c in conns:
        await c.prepare(claim)
        if settle:
            await c.prepare(settle)
    done = [0] * clients
    trips = [0] * clients
    empty = [False] * clients
    start = time.monotonic()
    deadline = start + duration

    async def client(k: int) -> None:
        target = targets[k]
        values = claim_values(batch, f"ceiling-{k}")
        while True:
            last = time.monotonic() >= deadline
            if last:
                values["claim_limit"] = 0  # settle what is held, claim nothing more
            rows = await target.fetch(claim, *bind(claim_params, values, "job_claim"))
            trips[k] += 1
            rows = claimed_rows(rows)
            ids = [r["id"] for r in rows]
            attempts = [r["attempt"] for r in rows]
            if settle:
                if rows:
                    values.update(ids=ids, attempts=attempts, results=[None] * len(ids))
                    await target.fetch(
                        settle, *bind(settle_params, values, "job_complete_many_if_owned")
                    )
                    trips[k] += 1
                    done[k] += len(rows)
            else:
                # The previous batch rode this claim and is settled now; this batch rides
                # the next one.
                done[k] += len(values["done_ids"])
                values.update(done_ids=ids, done_attempts=attempts, done_results=[None] * len(ids))
            if not rows:
                empty[k] = not last
                return

    try:
        await asyncio.gather(*(client(k) for k in range(clients)))
        elapsed = time.monotonic() - start
    finally:
        if pool is not None:
            await pool.close()
        for c in conns:
            await c.close()
    jobs = sum(done)
    return {
        "clients": clients,
        "batch": batch,
        "shape": shape,
        "via_pool": via_pool,
        "jobs": jobs,
        "seconds": elapsed,
        "jobs_per_s": jobs / elapsed if elapsed > 0 else 0.0,
        "round_trips": sum(trips),
        "ran_dry": any(empty),
    }


async def insert_single(dsn: str, *, jobs: int, schema: str = sql.DEFAULT_SCHEMA) -> dict[str, Any]:
    """``job_insert`` bare, one job per statement and commit, on one connection: what a
    single enqueue costs the server with no library around it."""
    text = sql.statement("job_insert", schema)
    names = parameters("job_insert", schema)
    values = {
        "kind": KIND,
        "carry": '{"i":0}',
        "priority": 1,
        "at": None,
        "after": None,
        "key": None,
        "max_failures": 25,
        "backoff_base": None,
        "backoff_factor": None,
        "backoff_cap": None,
        "backoff_jitter": None,
        "unique_for": None,
        "replace": False,
        "traceparent": None,
        "grp": None,  # no group (SPEC 13): the ceiling is the plain job's
    }
    args = bind(names, values, "job_insert")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.prepare(text)
        start = time.monotonic()
        for _ in range(jobs):
            await conn.fetchval(text, *args)
        elapsed = time.monotonic() - start
    finally:
        await conn.close()
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}


# --- the ceiling step of benchmarks.compare -------------------------------------------


async def measure(bench: Bench) -> None:
    """The ``ceiling`` step of ``benchmarks.compare``: the statements bare, first
    draining as many pending jobs as the worker's drains (the like-for-like ceiling),
    then claiming from a big table."""
    plan = bench.plan
    dsn = bench.dsns["venturi"]
    client = bench.clients["venturi"]
    out: list[dict[str, Any]] = []
    quick = plan.ceiling_fill < 1_000_000
    for clients, batch, shape, via_pool in ceiling_configs(quick, can_combine()):
        await bench.fill("venturi", plan.drain_jobs)
        await bench.checkpoint("venturi")
        r = await run(
            dsn,
            clients=clients,
            batch=batch,
            duration=plan.ceiling_seconds,
            shape=shape,
            via_pool=via_pool,
        )
        r["pending"] = plan.drain_jobs
        out.append(r)
        log(f"  {ceiling_label(r)}: {r['jobs_per_s']:,.0f} jobs/s")
    await client.reset()
    single = await insert_single(dsn, jobs=plan.single_jobs)
    log(f"  job_insert bare, one per commit: {single['jobs_per_s']:,.0f} jobs/s")
    bench.results["ceiling_insert"] = single
    await bench.fill("venturi", plan.ceiling_fill)
    for clients, batch in [(1, 50), (4, 50)]:
        if await client.unfinished() < 40_000 * plan.ceiling_seconds:
            await bench.fill("venturi", plan.ceiling_fill)
        await bench.checkpoint("venturi")
        r = await run(dsn, clients=clients, batch=batch, duration=plan.ceiling_seconds)
        r["pending"] = plan.ceiling_fill
        out.append(r)
        log(f"  {ceiling_label(r)}: {r['jobs_per_s']:,.0f} jobs/s")
    bench.results["ceiling"] = out


async def beside_drain(bench: Bench, name: str, level: int, drained: dict[str, Any]) -> None:
    """The like-for-like ceiling (one client, ``level`` rows per claim, settle riding the
    claim) measured right after venturi's drain at ``level`` in each round, on the same
    number of freshly filled jobs: the drain's ratio to it is then taken against the
    server as it was that minute. One ceiling run at the end of a sitting, against the
    median of three drains, carried the server's drift between the two into the ratio
    (its own rounds moved 1.1-1.5 ms a claim of 10 within minutes, JOURNAL)."""
    if name != "venturi" or not can_combine():
        return
    jobs = bench.plan.drain_jobs
    await bench.fill("venturi", jobs)
    await bench.checkpoint("venturi")
    r = await run(
        bench.dsns["venturi"],
        clients=1,
        batch=level,
        duration=bench.plan.ceiling_seconds,
        shape="combined",
    )
    ratio = drained["jobs_per_s"] / r["jobs_per_s"] if r["jobs_per_s"] else float("nan")
    pairs = bench.results.setdefault("ceiling_beside", {}).setdefault(str(level), [])
    pairs.append({"ceiling": r, "drain_jobs_per_s": drained["jobs_per_s"], "ratio": ratio})
    log(
        f"    beside it, {ceiling_label(r)}: {r['jobs_per_s']:,.0f} jobs/s (drain {ratio:.2f} of it)"
    )


def ceiling_configs(quick: bool, combined: bool) -> list[tuple[int, int, str, bool]]:
    """(clients, rows per claim, shape, via an asyncpg.Pool) of each like-for-like run."""
    separate = [(1, 1), (1, 10), (1, 32)] if quick else [(1, 1), (4, 1), (1, 10), (1, 32), (4, 32)]
    runs = [(c, b, "separate", False) for c, b in separate]
    shape = "separate"
    if combined:
        shape = "combined"
        runs += [(1, 1, shape, False), (1, 10, shape, False), (1, 32, shape, False)]
    # What one asyncpg.Pool acquire/release per statement costs (the worker's way).
    runs += [(1, 1, shape, True)] + ([] if quick else [(1, 32, shape, True)])
    return runs


def ceiling_label(r: dict[str, Any]) -> str:
    shape = "claim+settle" if r["shape"] == "separate" else "settle riding the claim"
    how = ", via asyncpg.Pool" if r["via_pool"] else ""
    return f"{r['clients']:>2} client(s) x {r['batch']:>2} row(s), {shape}{how}"
