"""venturi against procrastinate, pgqueuer, chancy, DBOS and oban, on one PostgreSQL, in
one run: the benchmark of record.

    python -m benchmarks.compare [--quick] [--json out.json]
    python -m benchmarks.compare --groups [--quick]     # the groups scenario alone

Each system gets a database of its own on the same server (created here and dropped at
the end). Measurements alternate between the systems (the order rotates each round) so
that drift on the machine hits all of them alike. Every worker runs in a subprocess
(``benchmarks.worker_proc``) with the same event loop, so its CPU time and peak RSS are
its own. This module is the command: the sizes and configurations are in
``benchmarks.configs``, the measuring in ``benchmarks.harness`` (and ``ceiling``,
``scenarios.workflows``), the printing and the targets in ``benchmarks.report``.
README.md explains each number, the peer configurations and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks import ceiling, configs
from benchmarks.common import add_dsn_option, cpu_model, git_head, log, run, versions, write_json
from benchmarks.configs import DRAIN_CONFIGS, LATENCY_CONFIGS, LEVELS, OWN_BEST, SYSTEMS, Plan
from benchmarks.harness import Bench
from benchmarks.report import report
from benchmarks.scenarios import workflows

STEPS = ("enqueue", "latency", "drain", "health", "rss", "ceiling", "workflows")
# The issue-16 scenarios whose --json compare reads for their targets.
SCENARIO_JSON = ("bulk", "scale", "steady", "pooler")


def plan_of(args: argparse.Namespace) -> Plan:
    plan = configs.QUICK if args.quick else configs.FULL
    if args.repeat:
        plan = Plan(**{**asdict(plan), "repeat": args.repeat})
    if args.drain_timeout:
        plan = Plan(**{**asdict(plan), "drain_timeout": args.drain_timeout})
    return plan


def steps_of(args: argparse.Namespace, names: list[str]) -> list[str]:
    """The steps this run takes, in order."""
    chosen = [s for s in STEPS if s not in args.skip.split(",")]
    # The workflow scenario (issue 23): part of a full run; --workflows runs it alone.
    if args.workflows:
        return ["workflows"]
    if args.quick:
        chosen = [s for s in chosen if s != "workflows"]
    if "venturi" not in names:
        chosen = [s for s in chosen if s not in ("rss", "ceiling")]
    return chosen


def step_functions(args: argparse.Namespace) -> dict[str, Callable[[Bench], Awaitable[None]]]:
    wf_plan = workflows.QUICK if args.quick else workflows.FULL
    if args.wf_levels:
        levels = tuple(int(n) for n in args.wf_levels.split(","))
        wf_plan = workflows.WfPlan(**{**asdict(wf_plan), "levels": levels})
    return {
        "enqueue": Bench.measure_enqueue,
        "latency": Bench.measure_latency,
        "drain": Bench.measure_drains,
        "health": Bench.measure_health,
        "rss": Bench.measure_rss,
        "ceiling": ceiling.measure,
        "workflows": lambda bench: workflows.measure(bench, wf_plan),
    }


async def take_steps(bench: Bench, args: argparse.Namespace, chosen: list[str]) -> None:
    functions = step_functions(args)
    await bench.setup()
    try:
        for step in chosen:
            log(f"{step}: (load average {os.getloadavg()[0]:.2f})")
            t0 = time.monotonic()
            try:
                await functions[step](bench)
            except Exception as exc:  # one broken step should not lose the others
                log(f"  ! {step} failed: {exc}")
                bench.results.setdefault("errors", {})[step] = str(exc)
            bench.step_seconds[step] = time.monotonic() - t0
    finally:
        await bench.teardown()


def header(args: argparse.Namespace, plan: Plan, machine: dict[str, Any], elapsed: float) -> str:
    server = machine["postgres"]
    return "\n".join(
        [
            f"venturi benchmark ({'quick' if args.quick else 'full'} mode, {elapsed:.0f} s), "
            f"venturi {git_head()}, event loop {args.loop} for every system",
            f"machine: {machine['nproc']} cores ({machine['cpu']}), "
            f"{server['version'].split(' on ')[0]}, "
            f"fsync={server['fsync']}, synchronous_commit={server['synchronous_commit']}",
            f"versions: {', '.join(f'{k} {v}' for k, v in versions().items())}",
            f"sizes: {plan}",
            "",
        ]
    )


def configuration_lines(names: list[str]) -> list[str]:
    lines = ["", "configurations:"]
    for name in names:
        for level in LEVELS:
            for label, _ in DRAIN_CONFIGS[name][level]:
                lines.append(f"  {name} drain c={level}: {label}")
        if name in OWN_BEST:
            lines.append(f"  {name} own best: {OWN_BEST[name][0]}")
        lines.append(f"  {name} pickup latency: {LATENCY_CONFIGS[name][0]}")
    return lines


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    plan = plan_of(args)
    names = [n for n in SYSTEMS if n in args.systems.split(",")]
    chosen = steps_of(args, names)
    if args.workflows:
        names = [n for n in names if n in workflows.SYSTEMS]
    bench = Bench(plan, names, args.dsn, args.loop, args.worker_timeout)
    if "ceiling" in chosen and "drain" in chosen:
        bench.after_drain = ceiling.beside_drain
    if args.health_systems:
        bench.health_names = [n for n in names if n in args.health_systems.split(",")]
    started = time.monotonic()
    server = await bench.server_facts()
    log(f"venturi benchmark, {'quick' if args.quick else 'full'} mode: {', '.join(names)}")
    await take_steps(bench, args, chosen)
    results = bench.results
    results["plan_drain_jobs"] = plan.drain_jobs
    results["peak_rss_mb"] = {n: max(v) for n, v in bench.rss.items() if v}
    text, targets = report(results, names, args.extras)
    elapsed = time.monotonic() - started
    machine = {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "postgres": server,
    }
    shown = [] if args.workflows else configuration_lines(names)
    print(header(args, plan, machine, elapsed) + text + "\n".join(shown))
    return {
        "mode": "quick" if args.quick else "full",
        "seconds": elapsed,
        "venturi_commit": git_head(),
        "loop": args.loop,
        "machine": machine,
        "versions": versions(),
        "plan": asdict(plan),
        "step_seconds": bench.step_seconds,
        "results": results,
        "targets": targets,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.compare", description=(__doc__ or "").split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="small sizes; under two minutes")
    p.add_argument("--json", metavar="PATH", help="write every figure to this JSON file")
    add_dsn_option(p)
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    p.add_argument("--skip", default="", help="comma-separated steps to skip: " + ",".join(STEPS))
    p.add_argument(
        "--wf-levels",
        default="",
        help="comma-separated concurrencies of the workflow scenario (default: quick 10, "
        "full 10,32)",
    )
    p.add_argument(
        "--workflows",
        action="store_true",
        help="run only the workflow scenario (issue 23) for venturi, chancy and dbos "
        "(sizes: --quick or full); a full run includes it",
    )
    p.add_argument(
        "--groups",
        action="store_true",
        help="run only the groups scenario (issue 37; benchmarks.scenarios.groups, sizes: "
        "--quick or full), venturi and DBOS's partitioned queue; its JSON goes to --json or "
        "benchmarks/results/groups-<mode>-<commit>.json",
    )
    p.add_argument("--repeat", type=int, default=0, help="rounds (default: quick 1, full 3)")
    p.add_argument(
        "--no-synchronous-commit",
        action="store_true",
        help="run venturi's drain and pickup workers with Worker(synchronous_commit=False)",
    )
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=0.0,
        help="cut a drain short after this many seconds (default: quick 10, full 300); "
        "its rate is then over the jobs it ran, and the report lists it",
    )
    p.add_argument(
        "--health-systems",
        default="",
        help="comma-separated subset for the index-health step (default: every system); "
        "it fills each system's table with up to 1,000,000 jobs through its own enqueue",
    )
    p.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop of every process",
    )
    for key in SCENARIO_JSON:
        p.add_argument(
            f"--{key}-json",
            metavar="PATH",
            help=f"the --json of a benchmarks.scenarios.{key} run, for its issue-16 targets",
        )
    p.add_argument("--worker-timeout", type=float, default=900.0, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.groups:
        # The groups scenario makes its own databases and keeps its own JSON (issue 37).
        from benchmarks.scenarios import groups

        groups.main(
            argparse.Namespace(
                dsn=args.dsn, quick=args.quick, out=args.json or "", steps="t1,t2,dbos", backlog=0
            )
        )
        return 0
    if args.no_synchronous_commit:
        configs.relaxed()
    args.extras = {}
    for key in SCENARIO_JSON:
        path = getattr(args, f"{key}_json")
        if path:
            args.extras[key] = json.loads(Path(path).read_text())
    payload = run(amain(args), args.loop)
    if args.json:
        write_json(args.json, payload)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
