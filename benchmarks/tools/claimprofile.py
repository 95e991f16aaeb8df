"""Where a claim's millisecond goes at c=10 (issue 27): the worker's timeline and the
claim statement's server time, in one process.

    python -m benchmarks.tools.claimprofile --concurrency 10 --jobs 20000 --json out.json

Two parts, each on a throwaway database of its own (``--dsn``, the admin DSN):

1. **the worker's timeline**: a real ``venturi.Worker`` at ``--concurrency`` drains
   ``--jobs`` no-op jobs in-process (uvloop), with ``venturi.db.claims.job_claim``
   wrapped to timestamp every claim (sent, answered, free slots asked for, completions
   carried, rows returned) and the no-op handler timestamping its start. From these:
   rows per claim, the claim's round trip as the loop sees it, the loop's own time
   between an answer and the next claim, and how long a slot stays empty: from a
   handler's end (a no-op ends where it starts) to the answer of the claim that carried
   its completion and refilled the slot, split into waiting for the loop to send that
   claim and the claim's round trip.
2. **the statement**: ``job_claim`` driven bare on one connection in the worker's shape
   (10 rows, the previous batch's completions riding each claim), its generic plan
   forced as the worker's prepared statement has it: ``EXPLAIN (ANALYZE, BUFFERS)`` of
   ``--explain`` claims, each CTE's share of the execution time; then the same claim's
   round trip with ``synchronous_commit`` on and off (claims alternating between two
   connections) and a trivial statement's round trip, which split the round trip into
   the network and protocol, the execution, and the commit's WAL flush.

Nothing is asserted; the figures go to stdout and ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
import uuid
from collections import Counter, defaultdict
from typing import Any

import asyncpg

import venturi
import venturi.db.claims as claims_module
from benchmarks import ceiling
from benchmarks.common import add_dsn_option, create_database, drop_database
from benchmarks.probe import install as install_probe
from benchmarks.sql import explain as bench_explain
from benchmarks.systems.venturi import Client as VenturiClient
from benchmarks.systems.venturi import venturi_noop
from venturi import sql

SCHEMA = sql.DEFAULT_SCHEMA


def _q(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def _ms(values: list[float]) -> dict[str, float]:
    """p50 / p90 / p99 / mean of ``values`` (seconds), in ms."""
    return {
        "p50": _q(values, 0.5) * 1e3,
        "p90": _q(values, 0.9) * 1e3,
        "p99": _q(values, 0.99) * 1e3,
        "mean": (statistics.fmean(values) if values else float("nan")) * 1e3,
    }


async def _fill(dsn: str, jobs: int) -> VenturiClient:
    client = VenturiClient(dsn)
    await client.open()
    await client.install()
    for start in range(0, jobs, 10_000):
        await client.enqueue_bulk(start, min(10_000, jobs - start))
    await client.analyze()
    return client


async def timeline(dsn: str, concurrency: int, jobs: int) -> dict[str, Any]:
    """Part 1: drain ``jobs`` at ``concurrency`` with every claim timestamped."""
    client = await _fill(dsn, jobs)
    claims: list[dict[str, Any]] = []
    started: dict[int, float] = {}  # carry i -> handler start
    id_to_i: dict[int, int] = {}
    settled_by: dict[int, int] = {}  # job id -> index of the claim carrying its completion
    answered_by: dict[int, int] = {}  # job id -> index of the claim that returned it
    original = claims_module.job_claim
    stop = asyncio.Event()

    async def timed(*args: Any, **kwargs: Any) -> Any:
        k = len(claims)
        for d in kwargs.get("done", ()):
            settled_by[d[0]] = k
        t0 = time.perf_counter()
        answer = await original(*args, **kwargs)
        t1 = time.perf_counter()
        for r in answer.claimed:
            answered_by[r["id"]] = k
            id_to_i[r["id"]] = json.loads(r["carry"])["i"]
        claims.append(
            {
                "sent": t0,
                "answered": t1,
                "limit": kwargs["limit"],
                "done": len(kwargs.get("done", ())),
                "rows": len(answer.claimed),
            }
        )
        return answer

    def probe(i: int) -> None:
        started[i] = time.perf_counter()
        if len(started) == jobs:
            stop.set()

    claims_module.job_claim = timed
    install_probe(probe)
    try:
        worker = venturi.Worker(None, dsn, [venturi_noop], concurrency=concurrency)
        await worker.run(stop)
    finally:
        claims_module.job_claim = original
        install_probe(lambda _i: None)
        await client.close()
    first, last = min(started.values()), max(started.values())
    # The drain window as compare measures it: first handler start to last.
    window = [c for c in claims if first <= c["answered"] <= last + 1.0]
    trips = [c["answered"] - c["sent"] for c in window]
    gaps = [b["sent"] - a["answered"] for a, b in itertools.pairwise(window)]
    empty, wait_loop, wait_trip = [], [], []
    for job_id, k in settled_by.items():
        i = id_to_i.get(job_id)
        if i is None or i not in started or k >= len(claims):
            continue
        c = claims[k]
        end = started[i]
        empty.append(c["answered"] - end)
        wait_loop.append(c["sent"] - end)
        wait_trip.append(c["answered"] - c["sent"])
    wall = last - first
    rows = Counter(c["rows"] for c in window)
    limits = Counter(c["limit"] for c in window)
    return {
        "concurrency": concurrency,
        "jobs": jobs,
        "jobs_per_s": (len(started) - 1) / wall,
        "claims": len(window),
        "rows_per_claim": {str(k): v for k, v in sorted(rows.items())},
        "free_slots_per_claim": {str(k): v for k, v in sorted(limits.items())},
        "mean_rows_per_claim": statistics.fmean(c["rows"] for c in window),
        "claim_round_trip_ms": _ms(trips),
        "loop_between_claims_ms": _ms(gaps),
        "share_of_wall_in_claims": sum(trips) / wall,
        "slot_empty_ms": _ms(empty),
        "slot_empty_waiting_for_the_claim_to_be_sent_ms": _ms(wait_loop),
        "slot_empty_in_the_claim_round_trip_ms": _ms(wait_trip),
        "wall_s": wall,
    }


def _cte_times(plan: dict[str, Any]) -> dict[str, float]:
    """Actual total time (ms) of each CTE / InitPlan / top node of an EXPLAIN ANALYZE."""
    out: dict[str, float] = defaultdict(float)

    def walk(node: dict[str, Any]) -> None:
        name = node.get("Subplan Name")
        if name:
            out[name] += node.get("Actual Total Time", 0.0) * node.get("Actual Loops", 1)
        for child in node.get("Plans", ()):
            walk(child)

    walk(plan["Plan"])
    return dict(out)


def _values(batch: int, token: uuid.UUID, done: list[Any]) -> dict[str, Any]:
    return {
        **ceiling.claim_values(batch, "benchmarks.tools.claimprofile"),
        "claim_token": token,
        "done_ids": [r["id"] for r in done],
        "done_attempts": [r["attempt"] for r in done],
        "done_results": [None] * len(done),
    }


async def statement(dsn: str, batch: int, explains: int, trips: int) -> dict[str, Any]:
    """Part 2: the claim statement's server time, its commit and the bare round trip."""
    client = await _fill(dsn, (explains + 2 * trips + 50) * batch)
    await client.close()
    text = sql.statement("job_claim", SCHEMA)
    names = ceiling.parameters("job_claim", SCHEMA)
    setting = sql.statement("maintenance/session_setting", SCHEMA)
    on, off = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await off.fetch(setting, "synchronous_commit", "off")
        await on.fetch(setting, "plan_cache_mode", "force_generic_plan")
        token = uuid.uuid4()
        done: list[Any] = []
        planning, execution, parts = [], [], defaultdict(list)
        explain = bench_explain(text, "ANALYZE, BUFFERS, FORMAT JSON", "job_claim")
        for _ in range(explains):
            args = ceiling.bind(names, _values(batch, token, done), "job_claim")
            (plan,) = json.loads(await on.fetchval(explain, *args))
            planning.append(plan["Planning Time"])
            execution.append(plan["Execution Time"])
            for name, ms in _cte_times(plan).items():
                parts[name].append(ms)
            # EXPLAIN returns no rows: take the claimed ones to settle in the next claim.
            done = await on.fetch(sql.statement("job_list_claimed", SCHEMA), 10 * batch)
        # Settle what the last EXPLAIN claimed, then time the plain statement.
        await on.fetch(text, *ceiling.bind(names, _values(0, token, done), "job_claim"))
        await on.fetch(setting, "plan_cache_mode", "auto")
        probe = sql.statement("connection_probe", SCHEMA)
        rt: dict[str, list[float]] = {"sync on": [], "sync off": [], "trivial": []}
        held = {"sync on": [], "sync off": []}  # type: dict[str, list[Any]]
        for c in (on, off):
            await c.prepare(text)
        for _ in range(trips):
            for label, c in (("sync on", on), ("sync off", off)):
                args = ceiling.bind(names, _values(batch, token, held[label]), "job_claim")
                t0 = time.perf_counter()
                rows = await c.fetch(text, *args)
                rt[label].append(time.perf_counter() - t0)
                held[label] = ceiling.claimed_rows(rows)
            t0 = time.perf_counter()
            await on.fetchval(probe)
            rt["trivial"].append(time.perf_counter() - t0)
    finally:
        await on.close()
        await off.close()
    return {
        "batch": batch,
        "explains": explains,
        "planning_ms": _ms([p / 1e3 for p in planning]),
        "execution_ms": _ms([e / 1e3 for e in execution]),
        "cte_ms_p50": {k: statistics.median(v) for k, v in sorted(parts.items())},
        "round_trip_ms": {k: _ms(v) for k, v in rt.items()},
    }


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rev": os.environ.get("VENTURI_BENCH_REV"),
        "load_average_before": os.getloadavg(),
    }
    for part in ("timeline", "statement"):
        name = f"bench_claimprofile_{os.getpid()}_{part}"
        dsn = await create_database(args.dsn, name)
        try:
            if part == "timeline":
                out[part] = await timeline(dsn, args.concurrency, args.jobs)
            else:
                out[part] = await statement(dsn, args.concurrency, args.explain, args.trips)
        finally:
            await drop_database(args.dsn, name)
    out["load_average_after"] = os.getloadavg()
    return out


def _print(r: dict[str, Any]) -> None:
    t, s = r["timeline"], r["statement"]
    la = (r["load_average_before"][0], r["load_average_after"][0])
    print(f"load average (1 min) before / after: {la[0]:.2f} / {la[1]:.2f}")
    print(f"worker at c={t['concurrency']}: {t['jobs_per_s']:,.0f} jobs/s, {t['claims']} claims")
    print(f"  rows per claim: {t['rows_per_claim']} (mean {t['mean_rows_per_claim']:.2f})")
    print(f"  free slots asked for: {t['free_slots_per_claim']}")

    def row(label: str, d: dict[str, float]) -> None:
        print(
            f"  {label:<52} p50 {d['p50']:6.3f}  p90 {d['p90']:6.3f}  p99 {d['p99']:6.3f}"
            f"  mean {d['mean']:6.3f} ms"
        )

    row("claim round trip (as the loop sees it)", t["claim_round_trip_ms"])
    row("loop: answer -> next claim sent", t["loop_between_claims_ms"])
    print(f"  share of the drain's wall time inside a claim: {t['share_of_wall_in_claims']:.1%}")
    row("slot empty: handler end -> refilling claim answered", t["slot_empty_ms"])
    row("  of which until the claim is sent", t["slot_empty_waiting_for_the_claim_to_be_sent_ms"])
    row("  of which the claim's round trip", t["slot_empty_in_the_claim_round_trip_ms"])
    print(f"job_claim bare, {s['batch']} rows, completions riding, generic plan:")
    row("planning (EXPLAIN ANALYZE)", s["planning_ms"])
    row("execution (EXPLAIN ANALYZE)", s["execution_ms"])
    for name, ms in s["cte_ms_p50"].items():
        print(f"    {name:<50} p50 {ms:6.3f} ms")
    for label, d in s["round_trip_ms"].items():
        row(f"round trip, {label}", d)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.claimprofile")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--explain", type=int, default=200, help="claims under EXPLAIN ANALYZE")
    parser.add_argument("--trips", type=int, default=500, help="timed claims per setting")
    parser.add_argument("--json", metavar="PATH")
    add_dsn_option(parser)
    args = parser.parse_args(argv)
    import uvloop

    result = uvloop.run(amain(args))
    _print(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
