"""The groups scenario's printed report (``benchmarks.scenarios.groups``): each figure with
the load it ran at, and issue 37's targets marked MET, MISSED or n/a."""

from __future__ import annotations

import math
import subprocess
from typing import Any

from benchmarks.common import median

MARKS = {True: "MET   ", False: "MISSED", None: "n/a   "}


def uptime() -> str:
    """``uptime``'s line (the load the figures ran under), or "?" where it is missing."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def _ok(value: float | None, good: bool) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return good


def _t1(t1: dict[str, Any], lines: list[str], targets: list[tuple[str, bool | None]]) -> None:
    lines.append("T1: drain at c=32 (rate over the first half of the jobs), claim under EXPLAIN")
    lines.append(
        f"  {'config':<14}{'jobs/s (per round)':<28}{'ratio':>7}{'claim ms':>10}{'x plain':>9}"
    )
    for name, s in t1["summary"].items():
        per = ", ".join(
            f"{rd['runs'][name]['jobs_per_s']:,.0f}@{rd['runs'][name]['load']:.1f}"
            for rd in t1["rounds"]
        )
        lines.append(
            f"  {name:<14}{per:<28}{s['ratio_median']:>7.2f}{s['claim_ms_mean']:>10.3f}"
            f"{s['claim_ratio_median']:>9.2f}"
        )
        if name != "plain":
            r, c = s["ratio_median"], s["claim_ratio_median"]
            targets.append((f"T1 {name}: drain >= 0.90 x plain ({r:.2f})", _ok(r, r >= 0.90)))
            targets.append((f"T1 {name}: claim mean <= 1.1 x plain ({c:.2f})", _ok(c, c <= 1.1)))
    lines.append("  (jobs/s@load average; ratio and x plain: medians of each round's ratio)")


def _cold(t2: dict[str, Any], lines: list[str], targets: list[tuple[str, bool | None]]) -> None:
    lines.append("T2: cold group, one job a second behind a hot group's backlog")
    p99 = {}
    for size, runs in t2["cold"].items():
        for c in runs:
            lines.append(
                f"  backlog {c['backlog']:>9,}: p50 {c['p50_ms']:7.1f} ms  p99 {c['p99_ms']:7.1f} "
                f"ms  max {c['max_ms']:7.1f} ms  ({c['cold_jobs']} cold jobs, "
                f"{c['hot_started']:,} hot started, at most {c.get('hot_short_max', 0):,} short, "
                f"load {c['load']:.1f})"
            )
        p99[size] = median([c["p99_ms"] for c in runs])
    targets.append(
        (f"T2 cold p99 <= 1 s ({p99['big']:.0f} ms)", _ok(p99["big"], p99["big"] <= 1000))
    )
    grow = p99["big"] / p99["small"] if p99["small"] else float("nan")
    targets.append((f"T2 cold p99 big <= 1.2 x small ({grow:.2f})", _ok(grow, grow <= 1.2)))


def _shares(t2: dict[str, Any], lines: list[str], targets: list[tuple[str, bool | None]]) -> None:
    fair = t2["fairness"]
    lines.append(
        f"T2 fairness: {len(fair['weights'])} groups of weight 1, claims per window "
        f"(load {fair['load']:.1f}):"
    )
    for counts, jain in zip(fair["counts"], fair["jain"], strict=True):
        lines.append(f"  Jain {jain:.4f}: {counts}")
    low = min(fair["jain"], default=float("nan"))
    targets.append((f"T2 Jain's index >= 0.95 in every window ({low:.4f})", _ok(low, low >= 0.95)))
    w = t2["weights"]
    lines.append(f"T2 weights 3:1: claims per window {w['counts']} (load {w['load']:.1f})")
    for run in (fair, w):
        dry = [g for g, n in run.get("short", {}).items() if n >= run["backlog"]]
        if dry:
            lines.append(f"  ! may have run dry between top-ups: {', '.join(dry)}")
    r = w["ratio"]
    targets.append((f"T2 weights 3:1 within +-5% ({r:.3f})", _ok(r, abs(r / 3 - 1) <= 0.05)))


def _dbos(d: dict[str, Any], lines: list[str], targets: list[tuple[str, bool | None]]) -> None:
    lines.append(f"DBOS partitioned queue: {d['jobs']:,} jobs over {d['groups']:,} groups, cap 1")
    for k, pair in enumerate(d["rounds"]):
        v, o = pair["venturi"], pair["dbos"]
        cut = " (cut short)" if o["cut"] else ""
        lines.append(
            f"  round {k}: venturi {v['jobs_per_s']:,.0f} jobs/s (load {v['load']:.1f}), "
            f"DBOS {o['jobs_per_s']:,.1f} jobs/s{cut} (load {o['load']:.1f}): "
            f"{pair['ratio']:.1f}x"
        )
    ratio = median([p["ratio"] for p in d["rounds"]])
    targets.append((f"DBOS: venturi >= 10x its throughput ({ratio:.1f}x)", _ok(ratio, ratio >= 10)))
    for name, c in d.get("cold", {}).items():
        lines.append(
            f"  cold {name}: p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms behind "
            f"{c['backlog']:,} (hot started {c['hot_started']:,}, load {c['load']:.1f})"
        )


def text(found: dict[str, Any]) -> str:
    lines = [
        f"venturi groups benchmark ({found['mode']}, {found['seconds']:.0f} s), "
        f"venturi {found['venturi_commit']}, {found['worker']}",
        f"at start: {found['uptime_start']}",
        f"at end:   {found['uptime_end']}",
        "",
    ]
    targets: list[tuple[str, bool | None]] = []
    if "t1" in found:
        _t1(found["t1"], lines, targets)
    if "t2" in found:
        _cold(found["t2"], lines, targets)
        _shares(found["t2"], lines, targets)
    if "dbos" in found:
        _dbos(found["dbos"], lines, targets)
    lines += ["", "targets (issue 37 item 3):"]
    lines += [f"  {MARKS[ok]} {what}" for what, ok in targets]
    found["targets"] = [{"target": what, "met": ok} for what, ok in targets]
    return "\n".join(lines)
