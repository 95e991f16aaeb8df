"""An A/B of two venturi trees, measurement by measurement: bulk enqueue, the drains and
pickup latency, each taken on A then B (then B then A the next round), so that the
machine's other work falls on both sides alike (issue 27).

    python -m benchmarks.tools.drain_ab --a /tmp/ab/A --b /tmp/ab/B --rounds 5 --json out.json

Each tree is a directory holding a ``venturi/`` (``git archive <commit> venturi``) and a
``benchmarks/`` beside it. Each side gets a database of its own with **its own tree's
schema** (applied by a subprocess importing that tree), and its workers run that tree
(``benchmarks.worker_proc`` from it), as ``benchmarks.compare`` runs them (its ``Bench``
does the measuring). The harness's own enqueue (the fills, the bulk enqueue, the pickup
samples) is the current tree's statements, so the trees must share the enqueue
statements; what the A/B isolates is the schema (its indexes) and the worker. Sizes:
``--bulk`` jobs in calls of 1,000; drains of ``--drain`` jobs at c=1, 10 and 32;
``--samples`` pickup samples at c=10. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import configs
from benchmarks.common import add_dsn_option, create_database, save_run
from benchmarks.harness import Bench
from benchmarks.systems.venturi import Client as VenturiClient

_APPLY = (
    "import asyncio, asyncpg, sys\n"
    "from venturi import db\n"
    "async def main():\n"
    "    c = await asyncpg.connect(sys.argv[1])\n"
    "    await db.schema.apply_schema(c, schema='venturi')\n"
    "    await c.close()\n"
    "asyncio.run(main())\n"
)


class SideBench(Bench):
    """The harness's Bench on one database whose schema is ``tree``'s, workers from
    ``tree``."""

    def __init__(
        self, side: str, tree: Path, plan: configs.Plan, admin_dsn: str, overrides: dict[str, Any]
    ) -> None:
        super().__init__(plan, ["venturi"], admin_dsn, "uvloop", 60.0)
        self.tree = tree
        self.root = tree  # the worker subprocesses run this side's tree
        # Worker keywords for this side only (--b-no-synchronous-commit): an A/B of a
        # setting on one tree.
        self.overrides = overrides
        self.tag = f"bench_ab_{os.getpid()}_{side.lower()}"

    async def setup(self) -> None:
        self.dsns["venturi"] = await create_database(self.admin_dsn, f"{self.tag}_venturi")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _APPLY,
            self.dsns["venturi"],
            env=dict(os.environ, PYTHONPATH=str(self.tree)),
            cwd=self.tree,
        )
        if await proc.wait() != 0:
            raise RuntimeError(f"applying {self.tree}'s schema failed")
        client = VenturiClient(self.dsns["venturi"])
        await client.open()
        self.clients["venturi"] = client
        self.monitors["venturi"] = await asyncpg.connect(self.dsns["venturi"])

    async def bulk(self, jobs: int, batch: int) -> float:
        client = self.clients["venturi"]
        await client.reset()
        await self.checkpoint("venturi")
        t0 = time.monotonic()
        for start in range(0, jobs, batch):
            await client.enqueue_bulk(start, min(batch, jobs - start))
        return jobs / (time.monotonic() - t0)

    async def measure(self, what: str, args: argparse.Namespace) -> float | dict[str, float]:
        if what == "bulk":
            return await self.bulk(args.bulk, 1_000)
        if what == "pickup":
            label, cfg = configs.LATENCY_CONFIGS["venturi"]
            r = await self.latency("venturi", label, {**cfg, **self.overrides})
            return {"p50": r["p50_ms"], "p99": r["p99_ms"]}
        level = int(what[1:])
        label, cfg = configs.DRAIN_CONFIGS["venturi"][level][0]
        r = await self.drain("venturi", label, {**cfg, **self.overrides}, args.drain, args.drain)
        # Commits per job: the round trips that end a transaction, which the machine's
        # load does not change.
        return {"": float(r["jobs_per_s"]), "commits/job": float(r["commits_per_job"])}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    plan = configs.Plan(
        **{
            **asdict(configs.QUICK),
            "latency_samples": args.samples,
            "drain_timeout": 60.0,
            "checkpoint": True,
        }
    )
    benches = {
        "A": SideBench("A", args.a, plan, args.dsn, {}),
        "B": SideBench(
            "B",
            args.b,
            plan,
            args.dsn,
            {"synchronous_commit": False} if args.b_no_synchronous_commit else {},
        ),
    }
    steps = [s for s in ("bulk", "c1", "c10", "c32", "pickup") if s not in args.skip.split(",")]
    got: dict[str, dict[str, list[float]]] = {s: {} for s in benches}
    loads: list[float] = []
    for b in benches.values():
        await b.setup()
    try:
        for rnd in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = ("A", "B") if rnd % 2 == 0 else ("B", "A")
            for step in steps:
                for side in order:
                    r = await benches[side].measure(step, args)
                    parts = r if isinstance(r, dict) else {"": r}
                    for k, v in parts.items():
                        got[side].setdefault(f"{step} {k}".strip(), []).append(v)
                    shown = ", ".join(f"{k} {v:,.2f}" for k, v in parts.items())
                    print(f"round {rnd + 1} {step} {side}: {shown}", flush=True)
    finally:
        for b in benches.values():
            await b.teardown()
    loads.append(os.getloadavg()[0])
    return {"args": {k: str(v) for k, v in vars(args).items()}, "load_average": loads, **got}


def _f(x: float) -> str:
    return f"{x:.4f}" if abs(x) < 10 else f"{x:,.1f}"


def summary(r: dict[str, Any]) -> str:
    lines = [
        f"{args_line(r)}\nload average (1 min) at each round's start and at the end: "
        + ", ".join(f"{x:.1f}" for x in r["load_average"]),
        f"{'figure':<16} {'A median':>10} {'B median':>10} {'B/A':>6}   rounds A | B",
    ]
    for k in r["A"]:
        a, b = r["A"][k], r["B"][k]
        ma, mb = statistics.median(a), statistics.median(b)
        each = " ".join(_f(x) for x in a) + " | " + " ".join(_f(x) for x in b)
        lines.append(f"{k:<16} {_f(ma):>10} {_f(mb):>10} {mb / ma:>6.3f}   {each}")
    return "\n".join(lines)


def args_line(r: dict[str, Any]) -> str:
    a = r["args"]
    return (
        f"A = {a['a_rev']} ({a['a']}), B = {a['b_rev']} ({a['b']}); {a['rounds']} rounds, "
        f"bulk {a['bulk']} jobs in calls of 1,000, drains of {a['drain']}, "
        f"{a['samples']} pickup samples; jobs/s (pickup: ms)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.drain_ab")
    parser.add_argument("--a", required=True, type=Path)
    parser.add_argument("--b", required=True, type=Path)
    parser.add_argument("--a-rev", default="A")
    parser.add_argument("--b-rev", default="B")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bulk", type=int, default=20_000)
    parser.add_argument("--drain", type=int, default=5_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--skip", default="", help="steps to leave out: bulk,c1,c10,c32,pickup")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--b-no-synchronous-commit",
        action="store_true",
        help="side B's workers run Worker(synchronous_commit=False)",
    )
    add_dsn_option(parser)
    args = parser.parse_args(argv)
    import uvloop

    result = uvloop.run(amain(args))
    text = summary(result)
    print(text)
    if args.json:
        save_run(args.json, result, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
