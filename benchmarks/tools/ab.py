"""An A/B of two venturi trees in one sitting: ``benchmarks.compare`` run on each in turn,
rounds alternating (A B, B A, A B, ...) so that the machine's drift and the other work on
it hit both sides alike.

    python -m benchmarks.tools.ab --a /tmp/ab/A --b /tmp/ab/B --rounds 3 --out results/ab-x \\
        -- --quick --systems venturi,pgqueuer --skip health,rss

Each tree is a directory holding a ``venturi/`` (e.g. ``git archive <commit> venturi``)
and the ``benchmarks/`` to run; ``--a-rev`` / ``--b-rev`` name them in the output
(``VENTURI_BENCH_REV``). Every run's JSON and progress go to ``--out``
(``<side>-<round>.json`` / ``.log``), and ``summary.txt`` / ``summary.json`` hold the
figures of each side per round and their medians, with the load average at each run's
start. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def figures(r: dict[str, Any]) -> dict[str, float]:
    """The A/B's figures from one compare JSON: venturi's and pgqueuer's."""
    out: dict[str, float] = {}
    res = r.get("results", r)
    for kind in ("bulk_enqueue", "single_enqueue"):
        for name, v in res.get(kind, {}).items():
            out[f"{kind.replace('_', ' ')}, {name}, jobs/s"] = v["jobs_per_s"]
    for name, by_key in res.get("drain", {}).items():
        for level in (1, 10, 32):
            rates = [v["jobs_per_s"] for k, v in by_key.items() if k.startswith(f"c{level}:")]
            if rates:
                out[f"drain c={level}, {name}, jobs/s"] = max(rates)
        if "own-best" in by_key:
            out[f"drain own best, {name}, jobs/s"] = by_key["own-best"]["jobs_per_s"]
    for name, v in res.get("pickup_latency", {}).items():
        out[f"pickup p50, {name}, ms"] = v["p50_ms"]
        out[f"pickup p99, {name}, ms"] = v["p99_ms"]
    for c in res.get("ceiling", []):
        if c.get("via_pool"):
            continue
        label = f"ceiling {c['clients']}x{c['batch']} {c['shape']}"
        if c.get("pending"):
            label += f" of {c['pending']:,}"
        out[f"{label}, jobs/s"] = c["jobs_per_s"]
    return out


def run(tree: Path, rev: str, args: list[str], out: Path, tag: str) -> dict[str, float]:
    env = dict(os.environ, VENTURI_BENCH_REV=rev, PYTHONPATH=str(tree))
    load = os.getloadavg()[0]
    path = out / f"{tag}.json"
    with open(out / f"{tag}.log", "w") as log:
        subprocess.run(
            [sys.executable, "-m", "benchmarks.compare", *args, "--json", str(path)],
            cwd=tree,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    got = figures(json.loads(path.read_text()))
    got["load average at start"] = load
    print(f"{tag} ({rev}): " + ", ".join(f"{k} {v:,.2f}" for k, v in got.items()), flush=True)
    return got


def summarize(a: list[dict[str, float]], b: list[dict[str, float]], revs: tuple[str, str]) -> str:
    keys = [k for k in a[0] if all(k in r for r in a + b)]
    lines = [f"{'figure':<48} {'A ' + revs[0]:>14} {'B ' + revs[1]:>14} {'B/A':>6}   rounds A | B"]
    for k in keys:
        ma, mb = statistics.median(r[k] for r in a), statistics.median(r[k] for r in b)
        rounds = " ".join(f"{r[k]:,.1f}" for r in a) + " | " + " ".join(f"{r[k]:,.1f}" for r in b)
        ratio = mb / ma if ma else float("nan")
        lines.append(f"{k:<48} {ma:>14,.2f} {mb:>14,.2f} {ratio:>6.2f}   {rounds}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.ab")
    parser.add_argument("--a", required=True, type=Path)
    parser.add_argument("--b", required=True, type=Path)
    parser.add_argument("--a-rev", default="A")
    parser.add_argument("--b-rev", default="B")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    # Each run's cwd is its tree, so a relative --out would name a folder inside it.
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    sides = {"A": (args.a, args.a_rev), "B": (args.b, args.b_rev)}
    got: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for rnd in range(1, args.rounds + 1):
        order = ("A", "B") if rnd % 2 else ("B", "A")
        for side in order:
            tree, rev = sides[side]
            got[side].append(run(tree, rev, rest, args.out, f"{side}-{rnd}"))
    text = summarize(got["A"], got["B"], (args.a_rev, args.b_rev))
    header = (
        f"python -m benchmarks.compare {' '.join(rest)}: A = {args.a_rev}, B = {args.b_rev}, "
        f"{args.rounds} rounds alternating (A B, B A, ...); medians, then every round\n"
    )
    (args.out / "summary.txt").write_text(header + text + "\n")
    (args.out / "summary.json").write_text(json.dumps({"args": rest, **got}, indent=1) + "\n")
    print(header + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
