"""What the search index's maintenance pass costs the worker: bulk and single enqueue and
the drain at c=1, 10 and 32 (benchmarks.compare's own measurements, venturi only), with
the worker's SearchIndex pass off and on, alternating within each round (the order
flips every round), in one sitting.

    python -m benchmarks.search_index_ab [--rounds 3] [--drain-jobs 20000] [--json PATH]

The pass runs in the drain's worker process as ``venturi worker`` runs it (every 2 s,
at most 1 s a run, batches of 5,000), indexing the jobs the drain completes while it
drains them. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict
from typing import Any

from benchmarks import compare


async def main(args: argparse.Namespace) -> dict[str, Any]:
    plan = compare.Plan(
        **{
            **asdict(compare.QUICK),
            "repeat": 1,
            "bulk_jobs": args.bulk_jobs,
            "single_jobs": 1000,
            "drain_jobs": args.drain_jobs,
            "drain_timeout": 120.0,
        }
    )
    bench = compare.Bench(plan, ["venturi"], args.dsn, "uvloop", 900.0)
    drain = bench.drain

    async def counted(*a: Any, **k: Any) -> dict[str, Any]:
        r: dict[str, Any] = await drain(*a, **k)
        r["indexed"] = await bench.monitors["venturi"].fetchval(
            "SELECT count(*) FROM venturi.job_search"
        )
        return r

    bench.drain = counted  # type: ignore[method-assign]
    await bench.setup()
    rounds: list[dict[str, Any]] = []
    try:
        for rnd in range(args.rounds):
            arms = ("off", "on") if rnd % 2 == 0 else ("on", "off")
            for arm in arms:
                os.environ["VENTURI_BENCH_SEARCH_INDEX"] = "1" if arm == "on" else "0"
                load = os.getloadavg()[0]
                t0 = time.monotonic()
                if not args.drains_only:
                    await bench.measure_enqueue()
                await bench.measure_drains()
                r = bench.results
                row = {
                    "round": rnd,
                    "index": arm,
                    "load": load,
                    "bulk_per_s": r.get("bulk_enqueue", {})
                    .get("venturi", {})
                    .get("jobs_per_s", 0.0),
                    "single_per_s": r.get("single_enqueue", {})
                    .get("venturi", {})
                    .get("jobs_per_s", 0.0),
                    "drain": {key: v["jobs_per_s"] for key, v in r["drain"]["venturi"].items()},
                    "seconds": time.monotonic() - t0,
                    # Per drain, the jobs the pass indexed before the worker stopped (a
                    # check that it ran: none with it off).
                    "indexed": {key: v.get("indexed") for key, v in r["drain"]["venturi"].items()},
                }
                rounds.append(row)
                drains = " ".join(f"{v:,.0f}" for v in row["drain"].values())
                print(
                    f"round {rnd} index {arm:3} load {load:.2f}: bulk {row['bulk_per_s']:,.0f}/s "
                    f"single {row['single_per_s']:,.0f}/s drain c1/c10/c32 {drains} jobs/s "
                    f"(indexed: {' '.join(str(v) for v in row['indexed'].values())})",
                    flush=True,
                )
    finally:
        await bench.teardown()
    summary: dict[str, Any] = {}
    for arm in ("off", "on"):
        mine = [r for r in rounds if r["index"] == arm]
        summary[arm] = {
            "bulk_per_s": statistics.median(r["bulk_per_s"] for r in mine),
            "single_per_s": statistics.median(r["single_per_s"] for r in mine),
            "drain": {
                key: statistics.median(r["drain"][key] for r in mine) for key in mine[0]["drain"]
            },
        }
        print(f"median index {arm}: {json.dumps(summary[arm])}")
    return {"rev": compare.git_head(), "rounds": rounds, "median": summary, "plan": asdict(plan)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn", default=os.environ.get("VENTURI_BENCH_DSN", compare.DEFAULT_ADMIN_DSN)
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drain-jobs", type=int, default=20_000)
    parser.add_argument("--bulk-jobs", type=int, default=20_000)
    parser.add_argument("--levels", default="1,10,32", help="the drains' concurrencies")
    parser.add_argument("--drains-only", action="store_true", help="no enqueue measurements")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    compare.LEVELS = tuple(int(n) for n in args.levels.split(","))
    import uvloop

    out = uvloop.run(main(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
