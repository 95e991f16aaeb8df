"""Two versions of ``job_claim`` driven bare, claim by claim, on one database: an A/B of
the statement alone, its noise shared (issue 27).

    python -m benchmarks.tools.claim_ab --a /tmp/ab/A --b /tmp/ab/B --batch 1,10 --claims 2000

Each tree (a directory holding a ``venturi/``, e.g. ``git archive <commit> venturi``)
renders its ``job_claim`` in a subprocess; the statements run here, each on a
connection of its own with asyncpg's prepared statement (the worker's generic plan after
five executions), in the worker's shape: each claim settles the previous batch as
completed. Claims alternate A, B, A, B..., so whatever else the machine does falls on
both alike. The schema is the current tree's: the two trees must share it (the statement
is what differs). Reports each side's round trip (p50 / p90 / p99 / mean, ms) and the
median ratio, per batch size; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import ceiling
from benchmarks.common import add_dsn_option, create_database, drop_database
from benchmarks.systems.venturi import Client as VenturiClient

_RENDER = (
    "import json, re; from venturi import sql; t = sql.statement('job_claim'); "
    "p = {int(n): v for n, v in re.findall(r'^-- \\$(\\d+) +\\S+ +(\\w+)', t, re.M)}; "
    "print(json.dumps([t, [p[i] for i in sorted(p)]]))"
)


def statement_of(tree: Path) -> tuple[str, list[str]]:
    """The tree's job_claim text and its parameter names in $n order."""
    out = subprocess.run(
        [sys.executable, "-c", _RENDER],
        env=dict(os.environ, PYTHONPATH=str(tree)),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    text, names = json.loads(out.stdout)
    return text, names


def _q(v: list[float], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))] * 1e3


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sides = {"A": statement_of(args.a), "B": statement_of(args.b)}
    out: dict[str, Any] = {"load_average_before": os.getloadavg()[0], "batches": {}}
    for batch in args.batch:
        name = f"bench_claim_ab_{os.getpid()}"
        dsn = await create_database(args.dsn, name)
        try:
            client = VenturiClient(dsn)
            await client.open()
            await client.install()
            total = 2 * (args.claims + 10) * batch
            for start in range(0, total, 10_000):
                await client.enqueue_bulk(start, min(10_000, total - start))
            await client.analyze()
            await client.close()
            conns = {s: await asyncpg.connect(dsn) for s in sides}
            state: dict[str, dict[str, Any]] = {}
            for s, (text, _) in sides.items():
                await conns[s].prepare(text)
                state[s] = ceiling.claim_values(batch, f"claim_ab-{s}")
            times: dict[str, list[float]] = {s: [] for s in sides}
            for i in range(args.claims + 10):
                for s in sides if i % 2 == 0 else reversed(list(sides)):
                    text, names = sides[s]
                    values = state[s]
                    argv = ceiling.bind(names, values, "job_claim")
                    t0 = time.perf_counter()
                    rows = await conns[s].fetch(text, *argv)
                    t1 = time.perf_counter()
                    if i >= 10:  # the first ten: preparing, the five custom plans
                        times[s].append(t1 - t0)
                    claimed = ceiling.claimed_rows(rows)
                    values.update(
                        done_ids=[r["id"] for r in claimed],
                        done_attempts=[r["attempt"] for r in claimed],
                        done_results=[None] * len(claimed),
                    )
            for c in conns.values():
                await c.close()
        finally:
            await drop_database(args.dsn, name)
        # Per side its figures, then the B/A ratios beside them: values of two shapes.
        res: dict[str, Any] = {
            s: {
                "p50_ms": _q(v, 0.5),
                "p90_ms": _q(v, 0.9),
                "p99_ms": _q(v, 0.99),
                "mean_ms": statistics.fmean(v) * 1e3,
            }
            for s, v in times.items()
        }
        res["B/A p50"] = res["B"]["p50_ms"] / res["A"]["p50_ms"]
        res["B/A mean"] = res["B"]["mean_ms"] / res["A"]["mean_ms"]
        out["batches"][str(batch)] = res
    out["load_average_after"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.claim_ab")
    parser.add_argument("--a", required=True, type=Path)
    parser.add_argument("--b", required=True, type=Path)
    parser.add_argument("--batch", type=lambda s: [int(x) for x in s.split(",")], default=[1, 10])
    parser.add_argument("--claims", type=int, default=2000, help="timed claims per side")
    parser.add_argument("--json", metavar="PATH")
    add_dsn_option(parser)
    args = parser.parse_args(argv)
    import uvloop

    result = uvloop.run(run(args))
    print(
        f"load average (1 min) before / after: {result['load_average_before']:.2f} / "
        f"{result['load_average_after']:.2f}"
    )
    for batch, res in result["batches"].items():
        for s in ("A", "B"):
            r = res[s]
            print(
                f"batch {batch:>3} {s}: p50 {r['p50_ms']:.3f}  p90 {r['p90_ms']:.3f}  "
                f"p99 {r['p99_ms']:.3f}  mean {r['mean_ms']:.3f} ms"
            )
        print(f"batch {batch:>3} B/A: p50 {res['B/A p50']:.3f}, mean {res['B/A mean']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
