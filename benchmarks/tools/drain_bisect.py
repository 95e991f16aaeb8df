"""Bisect a drain regression over the first-parent commits between GOOD and BAD, each
step an alternating A/B (``benchmarks.tools.drain_pair``) of GOOD's tree against the midpoint's
(issue 38: the c=10 regression).

    python -m benchmarks.tools.drain_bisect --good c3f4d06 --bad ed9ca6a --level 10 \\
        --rounds 6 --jobs 8000 --out benchmarks/results/issue38/bisect

A midpoint whose median jobs/s is below ``--threshold`` times GOOD's (0.875: halfway
between no change and the 0.75 the endpoints showed) counts as bad. Every step's JSON and
the decisions go to ``--out``; the trees are ``git archive``d under ``--trees``. Noise can
misplace a step: read the figures, and confirm the commit found with an A/B of it
against its parent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def tree(rev: str, root: Path) -> Path:
    path = root / rev
    if not (path / "venturi").is_dir():
        path.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", rev, "venturi"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.drain_bisect")
    p.add_argument("--good", required=True)
    p.add_argument("--bad", required=True)
    p.add_argument("--level", type=int, default=10)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--jobs", type=int, default=8000)
    p.add_argument("--threshold", type=float, default=0.875)
    p.add_argument("--trees", type=Path, default=Path("/tmp/venturi-bisect"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def short(r: str) -> str:
        return subprocess.run(
            ["git", "rev-parse", "--short", r], check=True, capture_output=True, text=True
        ).stdout.strip()

    good, bad = short(args.good), short(args.bad)
    revs = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", f"{good}..{bad}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    revs = [short(r) for r in revs]  # oldest first; the last is bad
    lo, hi = -1, len(revs) - 1  # revs[lo] good (-1: good itself), revs[hi] bad
    base = tree(good, args.trees)
    log = open(args.out / "steps.txt", "a")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        rev = revs[mid]
        out = args.out / f"{good}-{rev}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.tools.drain_pair",
                "--a",
                str(base),
                "--b",
                str(tree(rev, args.trees)),
                "--a-rev",
                good,
                "--b-rev",
                rev,
                "--levels",
                str(args.level),
                "--rounds",
                str(args.rounds),
                "--jobs",
                str(args.jobs),
                "--json",
                str(out),
            ],
            check=True,
        )
        got = json.loads(out.read_text())
        key = f"c{args.level} jobs/s"
        a = sorted(got["A"][key])[len(got["A"][key]) // 2]
        b = sorted(got["B"][key])[len(got["B"][key]) // 2]
        verdict = "bad" if b / a < args.threshold else "good"
        if verdict == "bad":
            hi = mid
        else:
            lo = mid
        line = (
            f"{rev} ({mid + 1} of {len(revs)}): B/A {b / a:.2f} -> {verdict}; "
            f"between {revs[lo] if lo >= 0 else good} and {revs[hi]}\n{got['summary']}\n"
        )
        log.write(line + "\n")
        log.flush()
        print(line, flush=True)
    found = f"first bad: {revs[hi]} (its parent on the first-parent line: " + (
        f"{revs[hi - 1]})" if hi > 0 else f"{good})"
    )
    log.write(found + "\n")
    print(found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
