"""Groups (SPEC 13, issue 37 item 3): what fair, capped claims cost venturi, how they hold
under a hot tenant, and DBOS Transact's partitioned queue on the same jobs.

    python -m benchmarks.compare --groups [--quick]      # or alone:
    python -m benchmarks.scenarios.groups [--quick] [--out PATH]

Every venturi worker here is an in-process ``venturi.Worker(concurrency=32)`` in this
process (the harness only waits while it drains), on a scratch database of its own;
handlers are no-ops that record their start (``Recorder``).

- **T1**: the same N no-op jobs drained without groups, and spread over G groups (every
  group has work: Zipf s = 1.1 or uniform) of a kind with ``group_cap`` 1 or 5. The rate
  is over the first half of the jobs (from the first start to the N/2-th), while every
  group still has work: with a cap, a Zipf drain's tail is the hottest group alone, at
  its cap, which is the cap's meaning and not the claim's cost. Configurations alternate
  within each round (the order rotates); each grouped drain's ratio is to the plain
  drain of its own round. Before each drain, on the seeded state, the claim statement
  (``job_claim`` or ``job_claim_grouped``, a batch of 32) is run under
  ``EXPLAIN (ANALYZE)`` in a rolled-back transaction, the same way for both.
- **T2 cold**: one hot group holds a backlog of B pending jobs (topped up as it drains,
  so it stays B) while a cold group enqueues one job a second, from the worker's first
  start on (DBOS's from its worker's ready line); enqueue-to-start is the handler's
  start (wall clock) less the job's ``created_at``; at B = the full backlog and at
  B = 10,000, alternating.
- **T2 fairness**: K groups of weight 1, each kept backlogged: Jain's index of claims
  (handler starts) per group in each window. **Weights**: two groups of weights 3 and 1.
- **DBOS** (``groups_dbos``): throughput at 1,000 groups with a cap of 1 per group, and
  the cold group's p99 behind a hot backlog, venturi and DBOS alternating.

Nothing is asserted; the targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import asyncpg

import venturi
from benchmarks.common import (
    add_dsn_option,
    git_head,
    log,
    median,
    save_run,
    scratch_database,
)
from benchmarks.scenarios import groups_report
from benchmarks.scenarios.groups_stats import group_counts, jain_index, per_window
from benchmarks.scenarios.groups_venturi import (
    CONCURRENCY,
    RECORD,
    Backlog,
    Unit,
    analyze,
    cold_once,
    explained,
    gbench_cap1,
    gbench_cap5,
    gbench_free,
    gbench_plain,
    insert,
    load,
    reset,
    wake_all,
    with_worker,
)
from venturi import db, sql


@dataclass(frozen=True)
class GroupsPlan:
    t1_jobs: int  # jobs per T1 drain
    t1_groups: int  # groups with work in T1
    rounds: int  # T1 rounds (every configuration once per round)
    explains: int  # explained claims per configuration per round
    backlog: int  # T2: the hot group's backlog (the big one)
    small_backlog: int  # T2: the backlog it is compared with
    # T2: how long the cold group enqueues, one job a second. Its p99 is by nearest rank:
    # over 60 jobs that is the slowest one, and one outlier then decided the big backlog's
    # ratio to the small one (JOURNAL.md, eleventh session); over 180, the second slowest.
    cold_seconds: int
    fair_groups: int  # T2: backlogged groups of equal weight
    fair_backlog: int  # T2: pending jobs each keeps
    window: float  # T2: seconds per fairness window
    windows: int  # T2: windows per fairness (and weights) run
    dbos_jobs: int  # DBOS: jobs per throughput drain, over dbos_groups groups
    dbos_groups: int
    dbos_backlog: int  # DBOS: the hot backlog behind the cold group
    # DBOS: how long each system's cold group enqueues. DBOS's hot backlog is not topped
    # up (it drains in about 20 s), so a longer window would only add jobs behind nothing.
    dbos_cold_seconds: int
    dbos_timeout: float  # a DBOS drain still going after this is cut short


QUICK = GroupsPlan(
    t1_jobs=20_000,
    t1_groups=10_000,
    rounds=2,
    explains=5,
    backlog=100_000,
    small_backlog=10_000,
    cold_seconds=30,
    fair_groups=8,
    fair_backlog=5_000,
    window=10.0,
    windows=3,
    dbos_jobs=3_000,
    dbos_groups=1_000,
    dbos_backlog=10_000,
    dbos_cold_seconds=30,
    dbos_timeout=60.0,
)
FULL = GroupsPlan(
    t1_jobs=100_000,
    t1_groups=10_000,
    rounds=3,
    explains=10,
    backlog=1_000_000,
    small_backlog=10_000,
    cold_seconds=180,
    fair_groups=16,
    fair_backlog=5_000,
    window=60.0,
    windows=3,
    dbos_jobs=10_000,
    dbos_groups=1_000,
    dbos_backlog=10_000,
    dbos_cold_seconds=60,
    dbos_timeout=300.0,
)


T1_CONFIGS: tuple[tuple[str, Any, Any], ...] = (
    ("plain", gbench_plain, "plain"),
    ("zipf-cap1", gbench_cap1, 1.1),
    ("zipf-cap5", gbench_cap5, 1.1),
    ("uniform-cap1", gbench_cap1, None),
    ("uniform-cap5", gbench_cap5, None),
)


async def t1_once(conn: asyncpg.Connection, dsn: str, plan: GroupsPlan, config: Any) -> Any:
    name, task, spread = config
    await reset(conn)
    if spread == "plain":
        jobs = [task.job(Unit(i)) for i in range(plan.t1_jobs)]
    else:
        counts = group_counts(plan.t1_jobs, plan.t1_groups, spread)
        jobs = [task.job(Unit(0), group=f"g{g}") for g, c in enumerate(counts) for _ in range(c)]
    await insert(conn, jobs)
    if spread != "plain":
        await wake_all(conn, task)
    await analyze(conn)
    claim = await explained(conn, task, spread != "plain", plan.explains)
    measure = plan.t1_jobs // 2
    RECORD.reset(measure)
    at = load()
    finished = await with_worker(dsn, task, RECORD.done.wait(), 300)
    rate = float("nan")
    if finished and RECORD.t_first is not None and RECORD.t_target is not None:
        rate = (measure - 1) / (RECORD.t_target - RECORD.t_first)
    log(f"  T1 {name}: {rate:,.0f} jobs/s, claim {claim['mean_ms']:.2f} ms (load {at:.1f})")
    return {"config": name, "jobs_per_s": rate, "claim": claim, "load": at, "measured": measure}


async def t1(conn: asyncpg.Connection, dsn: str, plan: GroupsPlan) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    for r in range(plan.rounds):
        k = r % len(T1_CONFIGS)
        order = T1_CONFIGS[k:] + T1_CONFIGS[:k]
        runs = {c[0]: await t1_once(conn, dsn, plan, c) for c in order}
        plain = runs["plain"]
        for found in runs.values():
            found["ratio"] = found["jobs_per_s"] / plain["jobs_per_s"]
            found["claim_ratio"] = found["claim"]["mean_ms"] / plain["claim"]["mean_ms"]
        rounds.append({"round": r, "order": [c[0] for c in order], "runs": runs})
    summary = {}
    for name, *_ in T1_CONFIGS:
        # One configuration's runs over the rounds (``runs`` above: one round's, by name).
        of_name = [rd["runs"][name] for rd in rounds]
        summary[name] = {
            "jobs_per_s_median": median([x["jobs_per_s"] for x in of_name]),
            "ratio_median": median([x["ratio"] for x in of_name]),
            "claim_ms_mean": sum(x["claim"]["mean_ms"] for x in of_name) / len(of_name),
            "claim_ratio_median": median([x["claim_ratio"] for x in of_name]),
        }
    return {"rounds": rounds, "summary": summary}


async def shares(dsn: str, conns: Any, weights: dict[str, float], plan: GroupsPlan) -> Any:
    """Claims per group per window with ``weights``' groups kept backlogged."""
    conn, refill, _ = conns
    await reset(conn)
    held = Backlog(gbench_free, list(weights), plan.fair_backlog)
    await held.seed(conn)
    for g, w in weights.items():
        if w != 1:
            await venturi.set_group(conn, gbench_free.kind, g, weight=w)
    RECORD.reset(0, keep=True)
    stop = asyncio.Event()
    keeper = asyncio.create_task(held.keep(refill, stop))
    at = load()
    warm = 2.0
    try:
        await with_worker(dsn, gbench_free, asyncio.sleep(warm + plan.window * plan.windows), 1e9)
    finally:
        stop.set()
        await keeper
    t0 = (RECORD.t_first or 0.0) + warm
    windows = per_window(RECORD.starts, t0, plan.window, plan.windows)
    counts = [[w[g] for g in weights] for w in windows]
    return {
        "weights": weights,
        "counts": counts,
        "load": at,
        "short": dict(held.short),
        "backlog": held.size,
    }


async def t2(dsn: str, conns: Any, plan: GroupsPlan) -> dict[str, Any]:
    cold: dict[str, list[dict[str, Any]]] = {"big": [], "small": []}
    for size in ("big", "small", "small", "big") if plan.rounds > 1 else ("big", "small"):
        backlog = plan.backlog if size == "big" else plan.small_backlog
        cold[size].append(await cold_once(dsn, conns, backlog, plan.cold_seconds))
    equal = {f"f{k}": 1.0 for k in range(plan.fair_groups)}
    fair = await shares(dsn, conns, equal, plan)
    fair["jain"] = [jain_index(c) for c in fair["counts"]]
    log(f"  T2 fairness: Jain {[f'{j:.4f}' for j in fair['jain']]}")
    weighted = await shares(dsn, conns, {"w3": 3.0, "w1": 1.0}, plan)
    weighted["ratios"] = [c[0] / c[1] if c[1] else float("nan") for c in weighted["counts"]]
    total = [sum(c[k] for c in weighted["counts"]) for k in range(2)]
    weighted["ratio"] = total[0] / total[1] if total[1] else float("nan")
    log(f"  T2 weights 3:1: {weighted['ratio']:.3f} ({weighted['ratios']})")
    return {"cold": cold, "fairness": fair, "weights": weighted}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.scenarios import groups_dbos

    plan = QUICK if args.quick else FULL
    if args.backlog:
        plan = replace(plan, backlog=args.backlog)
    started = time.monotonic()
    out: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "venturi_commit": git_head(),
        "plan": asdict(plan),
        "worker": f"in-process venturi.Worker(concurrency={CONCURRENCY}), one per run",
        "load_start": load(),
        "uptime_start": groups_report.uptime(),
    }
    steps = args.steps.split(",")
    async with scratch_database(args.dsn, "venturi_bench_groups") as dsn:
        conns = [await asyncpg.connect(dsn) for _ in range(3)]
        try:
            await db.schema.apply_schema(conns[0], schema=sql.DEFAULT_SCHEMA)
            if "t1" in steps:
                log(f"groups T1 (load {load():.1f})")
                out["t1"] = await t1(conns[0], dsn, plan)
            if "t2" in steps:
                log(f"groups T2 (load {load():.1f})")
                out["t2"] = await t2(dsn, conns, plan)
            if "dbos" in steps:
                log(f"groups DBOS (load {load():.1f})")
                out["dbos"] = await groups_dbos.measure(args.dsn, dsn, conns, plan)
        finally:
            for c in conns:
                await c.close()
    out["load_end"] = load()
    out["uptime_end"] = groups_report.uptime()
    out["seconds"] = time.monotonic() - started
    return out


def parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_dsn_option(p)
    p.add_argument("--quick", action="store_true", help="small sizes: a few minutes")
    p.add_argument("--out", default="", help="JSON path (default results/groups-<commit>)")
    p.add_argument("--steps", default="t1,t2,dbos", help="comma-separated: t1,t2,dbos")
    p.add_argument("--backlog", type=int, default=0, help="the hot group's big backlog")
    return p


def main(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.common import run

    found: dict[str, Any] = run(measure(args))
    text = groups_report.text(found)
    print(text)
    mode = "quick" if args.quick else "full"
    # Named after the commit measured (the one at the start of the run).
    commit = found["venturi_commit"].split("+")[0]
    path = args.out or f"benchmarks/results/groups-{mode}-{commit}.json"
    save_run(path, found, text)
    log(f"wrote {path}")
    return found


if __name__ == "__main__":
    main(parser().parse_args())
