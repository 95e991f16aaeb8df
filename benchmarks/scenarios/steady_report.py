"""The steady state's verdicts and pictures (``benchmarks.scenarios.steady``): its
targets (throughput per interval within 10% of the median, the tables' sizes bounded),
the summary of a held transaction (before, during and after it), ``--rescore`` of an
earlier run and ``--plot``.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any


def _bounded(samples: list[dict[str, Any]], heap: str, indexes: str) -> tuple[float, float]:
    """The largest ``heap + indexes`` of the first third of the samples and of the last."""
    third = max(1, len(samples) // 3)
    first = max(s[heap] + s[indexes] for s in samples[:third])
    last = max(s[heap] + s[indexes] for s in samples[-third:])
    return first, last


def targets(out: dict[str, Any]) -> list[tuple[bool, str]]:
    samples = out["samples"][1:] or out["samples"]
    held = any(s.get("phase") for s in samples)
    # With a hold, the steady state's own drift is the one before it (target 5 reports
    # the rest, hold_summary).
    steady = [s for s in samples if s.get("phase") == "before"] if held else samples
    steady = steady or samples
    rates = [s["jobs_per_s"] for s in steady]
    med = statistics.median(rates)
    drift = max(abs(r - med) / med for r in rates) if med else float("inf")
    first, last = _bounded(out["samples"], "jobs_heap", "jobs_indexes")
    p99 = [s["p99_ms"] or 0 for s in samples]
    top = out.get("max_jobs_per_s")
    offered = []
    if top:
        offered = [
            (
                out["rate"] >= 0.65 * top,
                f"offered rate near 70% of the maximum: {out['rate']:,.0f} of {top:,.0f} "
                f"jobs/s ({out['rate'] / top:.0%})",
            )
        ]
    history = []
    if all(s.get("history_heap") is not None for s in out["samples"]):
        h_first, h_last = _bounded(out["samples"], "history_heap", "history_indexes")
        history = [
            (
                h_last <= 1.5 * h_first,
                f"history table + indexes bounded: {h_first / 2**20:.1f} MB (first third's "
                f"max) -> {h_last / 2**20:.1f} MB (last third's)",
            )
        ]
    return [
        *offered,
        (
            drift <= 0.10,
            f"throughput per interval within 10% of its median ({med:,.0f} jobs/s at an "
            f"offered {out['rate']:,.0f}"
            f"{f', the {len(steady)} intervals before the hold' if held else ''}): "
            f"largest deviation {drift:.1%}",
        ),
        (
            last <= 1.5 * first,
            f"jobs table + indexes bounded: {first / 2**20:.1f} MB (first third's max) -> "
            f"{last / 2**20:.1f} MB (last third's); pickup p99 per interval "
            f"{min(p99):.1f}-{max(p99):.1f} ms",
        ),
        *history,
    ]


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else None


def hold_summary(out: dict[str, Any]) -> dict[str, Any]:
    """Target 5: throughput and pickup before (the warm-up left out), during and after the
    held transaction, the worst interval during it, the intervals after its release until
    throughput was back within 10% of the before median (and p99 at most before's
    highest), and the tables' sizes and dead rows around it."""
    samples = out["samples"]
    phases: dict[str, list[dict[str, Any]]] = {"before": [], "during": [], "after": []}
    for s in samples[1:]:
        if s.get("phase") in phases:
            phases[s["phase"]].append(s)
    res: dict[str, Any] = {"transaction": out.get("hold_info", {})}
    for name, group in phases.items():
        res[name] = {
            "intervals": [s["minute"] for s in group],
            "jobs_per_s": _median(group, "jobs_per_s"),
            "p50_ms": _median(group, "p50_ms"),
            "p99_ms": _median(group, "p99_ms"),
        }
    before, during, after = phases["before"], phases["during"], phases["after"]
    base = res["before"]["jobs_per_s"]
    if during:
        slow = min(during, key=lambda s: s["jobs_per_s"])
        late = max(during, key=lambda s: s["p99_ms"] or 0)
        res["during"]["slowest"] = {
            k: slow.get(k) for k in ("minute", "jobs_per_s", "p50_ms", "p99_ms", "pending")
        }
        res["during"]["highest_p99"] = {
            k: late.get(k) for k in ("minute", "jobs_per_s", "p50_ms", "p99_ms", "pending")
        }
    if base and after:
        within = [abs(s["jobs_per_s"] - base) / base <= 0.10 for s in after]
        back = within.index(True) + 1 if True in within else None
        res["after"]["throughput_back_in_interval"] = back
        res["after"]["throughput_stayed_back"] = back is not None and all(within[back - 1 :])
        ceiling = max((s["p99_ms"] or 0) for s in before) if before else None
        if ceiling is not None:
            ok = [(s["p99_ms"] or 0) <= ceiling for s in after]
            res["after"]["p99_ceiling_ms"] = ceiling
            res["after"]["p99_back_in_interval"] = ok.index(True) + 1 if True in ok else None
        res["after"]["seconds_per_interval"] = _median(after, "seconds")
    # The tables around the hold: at its start (the last interval before), at most during
    # it, and at the end of the run.
    last_before = before[-1] if before else samples[0]
    for table, heap, idx, dead in (
        ("jobs", "jobs_heap", "jobs_indexes", "n_dead_tup"),
        ("history", "history_heap", "history_indexes", "history_dead_tup"),
    ):
        if last_before.get(heap) is None:
            continue
        size = [s[heap] + s[idx] for s in (last_before, *during)]
        res[f"{table}_size"] = {
            "at_start": size[0],
            "max_during": max(size),
            "at_end": samples[-1][heap] + samples[-1][idx],
            "dead_at_start": last_before[dead],
            "dead_max_during": max(s[dead] for s in (last_before, *during)),
        }
    res["oldest_xact_age_max_during"] = max(
        (s.get("oldest_xact_age") or 0 for s in during), default=None
    )
    return res


def hold_lines(h: dict[str, Any]) -> list[str]:
    """The summary of hold_summary, one line each."""
    mb = 2**20
    t = h["transaction"]

    def phase(name: str) -> str:
        p = h[name]
        if p["jobs_per_s"] is None:
            return f"{name}: no interval"
        rel = ""
        if name != "before" and h["before"]["jobs_per_s"]:
            rel = f" ({p['jobs_per_s'] / h['before']['jobs_per_s']:.0%} of before)"
        return (
            f"{name} (intervals {p['intervals'][0]}-{p['intervals'][-1]}): median "
            f"{p['jobs_per_s']:,.0f} jobs/s{rel}, pickup p50 {p['p50_ms'] or 0:.1f} / p99 "
            f"{p['p99_ms'] or 0:.1f} ms"
        )

    lines = [
        f"a transaction held open {t.get('seconds', float('nan')):.0f} s by another session "
        f"(xid {t.get('xid')}, {t.get('opened_at')} -> {t.get('released_at')})"
        + (f"; ended early: {t['error']}" if t.get("error") else ""),
        phase("before"),
        phase("during"),
    ]
    if "slowest" in h["during"]:
        w, q = h["during"]["slowest"], h["during"]["highest_p99"]
        lines.append(
            f"worst during: interval {w['minute']} {w['jobs_per_s']:,.0f} jobs/s "
            f"(p99 {w['p99_ms'] or 0:.1f} ms, pending {w['pending']:,}); highest p99 "
            f"interval {q['minute']} {q['p99_ms'] or 0:.1f} ms ({q['jobs_per_s']:,.0f} jobs/s)"
        )
    lines.append(phase("after"))
    a = h["after"]
    if "throughput_back_in_interval" in a:
        back, p99 = a["throughput_back_in_interval"], a.get("p99_back_in_interval")
        lines.append(
            "recovery: throughput within 10% of before's median "
            + (
                f"in interval {back} after the release"
                + ("" if a["throughput_stayed_back"] else " (not staying there)")
                if back
                else "in none of the intervals after the release"
            )
            + f"; p99 at most before's highest ({a.get('p99_ceiling_ms') or 0:.1f} ms) "
            + (f"in interval {p99}" if p99 else "in none")
            + f" (intervals of {a['seconds_per_interval']:.0f} s)"
        )
    for table in ("jobs", "history"):
        z = h.get(f"{table}_size")
        if z:
            lines.append(
                f"{table} table + indexes: {z['at_start'] / mb:.1f} MB at the hold, at most "
                f"{z['max_during'] / mb:.1f} MB during it, {z['at_end'] / mb:.1f} MB at the "
                f"end; dead tuples {z['dead_at_start']:,} -> at most {z['dead_max_during']:,}"
            )
    if h.get("oldest_xact_age_max_during") is not None:
        lines.append(
            f"oldest transaction's age during the hold: up to "
            f"{h['oldest_xact_age_max_during']:,} xids"
        )
    return lines


def rescore(out: dict[str, Any], maximum: float = 0) -> dict[str, Any]:
    """An earlier run's rates over its intervals as the server's clock measured them
    (runs before 2d91365 divided by the nominal ``--sample``, which made the last, cut
    interval look slow), and its targets again."""
    from datetime import datetime

    samples = out["samples"]
    for prev, s in itertools.pairwise(samples):
        gap = datetime.fromisoformat(s["at"]) - datetime.fromisoformat(prev["at"])
        s["seconds"] = gap.total_seconds()
        s["jobs_per_s"] = s["claimed"] / s["seconds"]
    if maximum:
        out["max_jobs_per_s"] = maximum
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    if any(s.get("phase") for s in samples):
        out["hold"] = hold_summary(out)
    return out


def plot(out: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = out["samples"]
    if all("seconds" in x for x in s):
        # Each point at its interval's end, in minutes of the server's clock.
        t = list(itertools.accumulate(x["seconds"] / 60 for x in s))
    else:  # runs before 2d91365
        t = [x["minute"] * out["args"]["sample"] / 60 for x in s]
    history = all(x.get("history_heap") is not None for x in s)
    fig, axes = plt.subplots(4, 1, figsize=(8, 12), sharex=True)
    axes[0].plot(t, [x["jobs_per_s"] for x in s], marker="o")
    axes[0].axhline(out["rate"], linestyle="--", color="gray", label="offered")
    axes[0].set_ylabel("jobs/s claimed")
    axes[1].plot(t, [x["p99_ms"] or 0 for x in s], marker="o", label="p99")
    axes[1].plot(t, [x["p50_ms"] or 0 for x in s], marker=".", label="p50")
    axes[1].set_ylabel("pickup, ms")
    positive = [v for x in s for v in (x["p50_ms"], x["p99_ms"]) if v]
    if positive and max(positive) > 50 * min(positive):
        axes[1].set_yscale("log")
    mb = 2**20
    axes[2].plot(t, [x["jobs_heap"] / mb for x in s], label="jobs heap")
    axes[2].plot(t, [x["jobs_indexes"] / mb for x in s], label="jobs indexes")
    if history:
        axes[2].plot(t, [x["history_heap"] / mb for x in s], label="history heap")
        axes[2].plot(t, [x["history_indexes"] / mb for x in s], label="history indexes")
    axes[2].plot(t, [x["journal_total"] / mb for x in s], label="journal")
    axes[2].set_ylabel("MB")
    axes[3].plot(t, [x["n_live_tup"] for x in s], label="jobs live rows")
    axes[3].plot(t, [x["n_dead_tup"] for x in s], label="jobs dead rows")
    axes[3].plot(t, [x["pending"] for x in s], label="pending")
    if history:
        axes[3].plot(t, [x["history_live_tup"] for x in s], label="history live rows")
        axes[3].plot(t, [x["history_dead_tup"] for x in s], label="history dead rows")
    axes[3].set_ylabel("rows")
    axes[3].set_xlabel("minutes")
    # The held transaction: from the end of the last interval before it to the end of
    # the last during it.
    ends = {x.get("phase"): i for i, x in enumerate(s)}
    if "during" in ends:
        first = next(i for i, x in enumerate(s) if x.get("phase") == "during")
        lo = t[first - 1] if first else 0.0
        for k, ax in enumerate(axes):
            label = "_" if k else "transaction held open"
            ax.axvspan(lo, t[ends["during"]], color="orange", alpha=0.15, label=label)
    for ax in axes:
        ax.legend(fontsize="small")
    what = f"steady state at {out['rate']:,.0f} jobs/s"
    if out.get("history"):
        what += ", history table"
    fig.suptitle(f"venturi {out['commit']}: {what}")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
