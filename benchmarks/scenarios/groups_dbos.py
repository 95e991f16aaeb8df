"""DBOS Transact's partitioned queue against venturi's groups, on the same no-op jobs
(part of ``benchmarks.scenarios.groups``; run it with ``--steps dbos``).

DBOS: the workflow of ``benchmarks.systems.dbos`` on a queue registered with
``worker_concurrency=32`` and ``partition_concurrency`` (which makes it partitioned: every
enqueue names a ``queue_partition_key``), enqueued through ``DBOSClient`` in
transactions of 1,000, its worker a ``benchmarks.worker_proc`` process (DBOS is one per
process). venturi: ``group_cap``, an in-process ``Worker(concurrency=32)``.

- **throughput**: N jobs over G groups (partition keys), a cap of 1 per group in both;
  the rate from the first start to the last (N-th). Systems alternate per round.
- **cold p99**: a hot group (partition) holds a backlog while a cold one enqueues a job a
  second; no cap on the hot one (DBOS: ``partition_concurrency=32``, the worker's
  concurrency). DBOS's enqueue-to-start is from before the enqueue call (the harness's
  clock) to the worker's report of the start (the same machine's CLOCK_MONOTONIC);
  venturi's from the job's ``created_at`` (groups_venturi.cold_once, its backlog topped up).
  DBOS's backlog is not topped up: ``hot_started`` says how much of it ran meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from benchmarks.common import log, percentile, scratch_database
from benchmarks.harness import run_worker, spawn_worker, worker_failed
from benchmarks.scenarios import groups_venturi as gv
from benchmarks.systems import dbos

COLD_BASE = 10_000_000  # the cold jobs' numbers


def _spec(dsn: str, cfg: dict[str, Any], mode: str, target: int, timeout: float) -> Any:
    return {
        "system": "dbos",
        "dsn": dsn,
        "cfg": {"concurrency": gv.CONCURRENCY, **cfg},
        "mode": mode,
        "target": target,
        "loop": "uvloop",
        "timeout": timeout,
    }


async def _dbos_fill(client: Any, items: list[tuple[int, str]]) -> None:
    await client.reset()
    for k in range(0, len(items), 1_000):
        await client.enqueue_partitioned(items[k : k + 1_000])
    await client.analyze()


async def dbos_drain(client: Any, dsn: str, plan: Any) -> dict[str, Any]:
    n, g = plan.dbos_jobs, plan.dbos_groups
    await _dbos_fill(client, [(i, f"g{i % g}") for i in range(n)])
    at = gv.load()
    spec = _spec(dsn, {"partition_concurrency": 1}, "drain", n, plan.dbos_timeout)
    r = await run_worker(spec)
    end = r["t_target"] or r["t_last"]
    ran = n if r["t_target"] else r["count"]
    rate = (ran - 1) / (end - r["t_first"]) if r["t_first"] and end and ran > 1 else 0.0
    log(f"  DBOS drain {n:,} over {g:,} partitions: {rate:,.0f} jobs/s (ran {ran:,})")
    return {"system": "dbos", "jobs_per_s": rate, "ran": ran, "cut": not r["t_target"], "load": at}


async def _read(proc: Any, seen: dict[int, float], ready: asyncio.Event) -> dict[str, Any]:
    final: dict[str, Any] = {}
    while line := (await proc.stdout.readline()).decode().strip():
        if line == "ready":
            ready.set()
        elif line.startswith("J "):
            _, i, t = line.split()
            seen[int(i)] = float(t)
        elif line.startswith("{"):
            final = json.loads(line)
    return final


async def dbos_cold(client: Any, dsn: str, plan: Any) -> dict[str, Any]:
    await _dbos_fill(client, [(i, "hot") for i in range(plan.dbos_backlog)])
    spec = _spec(dsn, {"partition_concurrency": gv.CONCURRENCY}, "latency", 0, 900)
    proc, errors = await spawn_worker(spec, asyncio.subprocess.PIPE)
    seen: dict[int, float] = {}
    ready = asyncio.Event()
    reader = asyncio.create_task(_read(proc, seen, ready))
    sent: dict[int, float] = {}
    at = gv.load()
    try:
        await asyncio.wait_for(ready.wait(), 60)
        start = time.monotonic()
        for k in range(plan.dbos_cold_seconds):
            sent[COLD_BASE + k] = time.monotonic()
            await client.enqueue_keyed(COLD_BASE + k, gv.COLD)
            await asyncio.sleep(max(0.0, start + k + 1 - time.monotonic()))
        for _ in range(300):  # until every cold job started, or 30 s more
            if all(i in seen for i in sent):
                break
            await asyncio.sleep(0.1)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await proc.wait()
        final = await reader
    if proc.returncode != 0 or not final:
        raise worker_failed(proc, errors, "dbos cold")
    errors.close()
    ms = [(seen[i] - t) * 1000 for i, t in sent.items() if i in seen]
    found = {
        "system": "dbos",
        "backlog": plan.dbos_backlog,
        "cold_jobs": len(ms),
        "cold_sent": len(sent),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms, default=float("nan")),
        "hot_started": sum(1 for i in seen if i < COLD_BASE),
        "load": at,
        # Each cold job's enqueue-to-start, kept so that runs can be pooled later (a p99
        # of 180 jobs is the second slowest: JOURNAL.md, the sixteenth session).
        "cold_ms": [round(x, 3) for x in ms],
    }
    log(f"  DBOS cold: p50 {found['p50_ms']:.0f} ms, p99 {found['p99_ms']:.0f} ms")
    return found


async def measure(admin_dsn: str, dsn: str, conns: Any, plan: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"groups": plan.dbos_groups, "jobs": plan.dbos_jobs, "rounds": []}
    async with scratch_database(admin_dsn, "venturi_bench_groups_dbos") as ddsn:
        client = dbos.Client(ddsn)
        await client.open()
        try:
            await client.install()
            for r in range(plan.rounds):
                # Each system's drain, then the ratio of the two.
                pair: dict[str, Any] = {}
                for name in ("venturi", "dbos") if r % 2 == 0 else ("dbos", "venturi"):
                    if name == "dbos":
                        pair[name] = await dbos_drain(client, ddsn, plan)
                    else:
                        pair[name] = await gv.venturi_drain(
                            conns[0], dsn, plan.dbos_jobs, plan.dbos_groups, plan.dbos_timeout
                        )
                pair["ratio"] = pair["venturi"]["jobs_per_s"] / max(
                    pair["dbos"]["jobs_per_s"], 1e-9
                )
                out["rounds"].append(pair)
            out["cold"] = {
                "venturi": await gv.cold_once(
                    dsn, conns, plan.dbos_backlog, plan.dbos_cold_seconds
                ),
                "dbos": await dbos_cold(client, ddsn, plan),
            }
        finally:
            await client.close()
    return out
