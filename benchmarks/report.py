"""The benchmark of record's report: the table of figures, the raw-SQL ceiling, the
drains cut short, and each issue's targets marked MET, MISSED or n/a (the issue-16 ones
also read the JSON of the scenarios given to ``compare``: ``--bulk-json``,
``--scale-json``, ``--steady-json``, ``--pooler-json``).
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.ceiling import ceiling_label
from benchmarks.common import fmt, median
from benchmarks.configs import LEFT_OUT, LEVELS
from benchmarks.scenarios import workflows

MARKS = {True: "MET   ", False: "MISSED", None: "n/a   "}


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b or a != a or b != b:
        return "-"
    return f"{a / b:.2f}"


def drain_at(results: dict[str, Any], name: str, level: int) -> tuple[float, str]:
    """The fastest configuration of ``name`` at ``level``: (jobs/s, label)."""
    by_key = results["drain"].get(name, {})
    best = (float("nan"), "-")
    for r in by_key.values():
        if r.get("level") == level and not (best[0] >= r["jobs_per_s"]):
            best = (r["jobs_per_s"], r["config"])
    return best


def fastest_peer(results: dict[str, Any], peers: list[str], level: int) -> tuple[float, str]:
    """The fastest peer configuration for a target at ``level``: at c=10 and c=32 a peer's
    own best configuration counts too."""
    best = (float("nan"), "-")
    for name in peers:
        candidates = [drain_at(results, name, level)]
        own = results["drain"].get(name, {}).get("own-best")
        if own and level > 1:
            candidates.append((own["jobs_per_s"], own["config"]))
        for rate, label in candidates:
            if rate == rate and not (best[0] >= rate):
                best = (rate, f"{name}: {label}")
    return best


class Table:
    """The figures, one row per metric: a column per system, then venturi's ratio to each
    peer."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.peers = [n for n in names if n != "venturi"]
        self.rows: list[list[str]] = []

    def row(self, metric: str, values: dict[str, float | None], digits: int = 0) -> None:
        v = values.get("venturi")
        self.rows.append(
            [metric]
            + [fmt(values.get(n), digits) for n in self.names]
            + [ratio(v, values.get(p)) for p in self.peers]
        )

    def lines(self) -> list[str]:
        if not self.rows:
            return []
        cols = ["metric", *self.names, *[f"v/{p[:5]}" for p in self.peers]]
        widths = [max(len(r[i]) for r in [cols, *self.rows]) for i in range(len(cols))]

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)
            )

        return [line(cols), "  ".join("-" * w for w in widths), *map(line, self.rows)]


def enqueue_rows(table: Table, results: dict[str, Any]) -> None:
    if "bulk_enqueue" not in results:
        return
    for key, what in (("bulk_enqueue", "bulk"), ("single_enqueue", "single")):
        table.row(f"{what} enqueue, jobs/s", {n: r["jobs_per_s"] for n, r in results[key].items()})
    if "venturi-psycopg" in results["bulk_enqueue"]:
        # The psycopg 3 path: venturi's enqueue on psycopg beside procrastinate's,
        # which always enqueues on psycopg (pgqueuer's figure is its asyncpg one).
        for key, what in (("bulk_enqueue", "bulk"), ("single_enqueue", "single")):
            got = {n: r["jobs_per_s"] for n, r in results[key].items()}
            table.row(
                f"{what} enqueue on psycopg 3, jobs/s",
                {"venturi": got["venturi-psycopg"], "procrastinate": got.get("procrastinate")},
            )


def drain_rows(table: Table, results: dict[str, Any]) -> None:
    if "drain" not in results:
        return
    names = table.names
    for level in LEVELS:
        table.row(f"drain c={level}, jobs/s", {n: drain_at(results, n, level)[0] for n in names})
    own = {
        n: results["drain"][n]["own-best"]["jobs_per_s"]
        for n in names
        if "own-best" in results["drain"].get(n, {})
    }
    if own:
        table.row("drain, peer's own best config, jobs/s", own)
    c32 = {n: level_run(results, n, 32) for n in names}
    table.row("CPU us/job, drain c=32", run_field(c32, "cpu_us_per_job"))
    table.row("commits/job, drain c=32", run_field(c32, "commits_per_job"), 2)
    table.row("WAL bytes/job, drain c=32", run_field(c32, "wal_bytes_per_job"))
    c1 = {n: level_run(results, n, 1) for n in names}
    table.row("commits/job, drain c=1", run_field(c1, "commits_per_job"), 2)


def run_field(runs: dict[str, dict[str, Any] | None], key: str) -> dict[str, float | None]:
    """``key`` of each system's run, None for a system without one (a run is never empty)."""
    return {n: None if r is None else r[key] for n, r in runs.items()}


def other_rows(table: Table, results: dict[str, Any]) -> None:
    """Pickup latency, index health and peak RSS."""
    if "pickup_latency" in results:
        lat = results["pickup_latency"]
        table.row(
            "pickup latency p50, ms (lower wins)", {n: r["p50_ms"] for n, r in lat.items()}, 2
        )
        table.row(
            "pickup latency p99, ms (lower wins)", {n: r["p99_ms"] for n, r in lat.items()}, 2
        )
        table.row("  first job after start, ms", {n: r["first_ms"] for n, r in lat.items()}, 2)
    if results.get("index_health"):
        h = results["index_health"]
        small = next(iter(h.values()))["small"]["pending"]
        big = next(iter(h.values()))["big"]["pending"]
        table.row(
            f"drain, {small:,} pending, jobs/s", {n: r["small"]["jobs_per_s"] for n, r in h.items()}
        )
        table.row(
            f"drain, {big:,} pending, jobs/s", {n: r["big"]["jobs_per_s"] for n, r in h.items()}
        )
        table.row("  big/small", {n: r["ratio"] for n, r in h.items()}, 2)
    peak = results.get("peak_rss_mb", {})
    if peak:
        table.row("worker peak RSS, MB (lower wins)", peak, 1)


def ceiling_lines(results: dict[str, Any]) -> list[str]:
    if "ceiling" not in results:
        return []
    lines = [
        "",
        "raw-SQL ceiling (venturi's own job_claim / job_complete_many_if_owned, "
        "asyncpg, no framework):",
    ]
    for r in results["ceiling"]:
        lines.append(
            f"  {r.get('pending', 0):>9,} pending, {ceiling_label(r)}: "
            f"{r['jobs_per_s']:>9,.0f} jobs/s"
        )
    for level, pairs in results.get("ceiling_beside", {}).items():
        rounds = ", ".join(f"{p['ceiling']['jobs_per_s']:,.0f} ({p['ratio']:.2f})" for p in pairs)
        lines.append(
            f"  beside each round's drain, 1 client x {int(level):>2} row(s), settle riding "
            f"the claim: {rounds} jobs/s (the drain's share of it)"
        )
    if "ceiling_insert" in results:
        r = results["ceiling_insert"]
        lines.append(
            f"  job_insert bare, one job per statement and commit: {r['jobs_per_s']:,.0f} jobs/s"
        )
    return lines


def target_lines(title: str, targets: list[dict[str, Any]]) -> list[str]:
    if not targets:
        return []
    return ["", title, *(f"  {MARKS[t['met']]} {t['target']}: {t['measured']}" for t in targets)]


def report(
    results: dict[str, Any], names: list[str], extras: dict[str, Any] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The printed report of a run, and every target it judged."""
    table = Table(names)
    enqueue_rows(table, results)
    drain_rows(table, results)
    other_rows(table, results)
    lines = table.lines() + ceiling_lines(results)
    short = cut_short(results)
    if short:
        lines.append("")
        lines.append("cut short (the drain timeout ended them; their rate is over the jobs seen):")
        lines.extend(f"  {what}" for what in short)
    for step, error in results.get("errors", {}).items():
        lines.append(f"step {step} FAILED: {error.splitlines()[0] if error else '?'}")
    targets = evaluate(results, names)
    lines += target_lines("issue-4 targets:", targets)
    # A run of the workflow scenario alone (--workflows) has no issue-16 figure to judge.
    alone = not any(k in results for k in ("drain", "bulk_enqueue", "pickup_latency"))
    later = [] if alone else evaluate_16(results, names, extras or {})
    lines += target_lines("issue-16 targets:", later)
    own = [] if alone else evaluate_38(results)
    lines += target_lines("issue-38 targets:", own)
    lines.extend(workflows.report(results))
    wf_targets = workflows.evaluate(results)
    lines += target_lines("issue-23 targets (workflows):", wf_targets)
    return "\n".join(lines), targets + later + own + wf_targets


def evaluate_38(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 38's own targets that this run measures: the drain's share of the raw-SQL
    ceiling measured beside it (the median of the rounds' ratios) and CPU per job at
    c=32. Its pickup and bulk targets are issue 16's 2 and 3, judged there."""
    out: list[dict[str, Any]] = []

    def add(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": f"[38] {target}", "met": met, "measured": measured})

    for level, pairs in results.get("ceiling_beside", {}).items():
        if int(level) == 1:
            continue
        mid = median([p["ratio"] for p in pairs])
        each = ", ".join(f"{p['ratio']:.2f}" for p in pairs)
        add(
            f"drain c={level} >= 0.85 of the raw-SQL ceiling beside it (median of rounds)",
            mid >= 0.85,
            f"{mid:.2f} (rounds {each})",
        )
    r = level_run(results, "venturi", 32) if "drain" in results else None
    if r and r.get("cpu_us_per_job") is not None:
        cpu = r["cpu_us_per_job"]
        add("CPU per job at c=32 <= 30 us", cpu <= 30, f"{cpu:.1f} us")
    return out


def cut_short(results: dict[str, Any]) -> list[str]:
    out = []
    for name, by_key in results.get("drain", {}).items():
        for key, r in by_key.items():
            if r.get("cut_short"):
                out.append(f"{name} drain {key}: {r['jobs']:,} jobs")
    for name, h in results.get("index_health", {}).items():
        for size in ("small", "big"):
            if h[size].get("cut_short"):
                out.append(
                    f"{name} drain with {h[size]['pending']:,} pending: {h[size]['jobs']:,} jobs"
                )
    r = results.get("venturi_rss")
    if r and r.get("cut_short"):
        out.append(f"venturi peak-RSS drain: {r['jobs']:,} jobs")
    return out


def level_run(results: dict[str, Any], name: str, level: int) -> dict[str, Any] | None:
    best = None
    for r in results["drain"].get(name, {}).values():
        if r.get("level") == level and (best is None or r["jobs_per_s"] > best["jobs_per_s"]):
            best = r
    return best


def ceiling_run(results: dict[str, Any], clients: int, batch: int) -> dict[str, Any] | None:
    """The ceiling run of this size in the worker's own shape (combined when it exists)."""
    found = None
    small = results.get("plan_drain_jobs")
    for r in results.get("ceiling", []):
        if r.get("pending") != small:
            continue
        if r["clients"] == clients and r["batch"] == batch and not r["via_pool"]:
            if found is None or r["shape"] == "combined":
                found = r
    return found


def times(got: float, need: float) -> str:
    """``got`` as "1.23x", with a third decimal when two would round it onto ``need``."""
    text = f"{got:.2f}x"
    if got < need and text == f"{need:.2f}x":
        text = f"{got:.3f}x"
    return text


def evaluate(results: dict[str, Any], names: list[str]) -> list[dict[str, Any]]:
    peers = [n for n in names if n != "venturi"]
    out: list[dict[str, Any]] = []

    def add(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": target, "met": met, "measured": measured})

    if "venturi" not in names:
        return out
    if "drain" in results and peers:
        for level, need in ((32, 2.0), (10, 2.0), (1, 1.5)):
            v = drain_at(results, "venturi", level)[0]
            p, label = fastest_peer(results, peers, level)
            got = v / p if p == p and p else float("nan")
            add(
                f"drain c={level} >= {need}x the fastest peer configuration",
                got >= need if got == got else None,
                f"{times(got, need)} ({v:,.0f} vs {p:,.0f} jobs/s, {label})",
            )
    if "bulk_enqueue" in results and "pgqueuer" in names:
        for key, what in (("single_enqueue", "single"), ("bulk_enqueue", "bulk")):
            v = results[key]["venturi"]["jobs_per_s"]
            p = results[key]["pgqueuer"]["jobs_per_s"]
            add(
                f"{what} enqueue >= 2x pgqueuer",
                v / p >= 2,
                f"{times(v / p, 2)} ({v:,.0f} vs {p:,.0f} jobs/s)",
            )
    if "pickup_latency" in results and peers:
        lat = results["pickup_latency"]
        best = min(peers, key=lambda n: lat[n]["p50_ms"])
        v, p = lat["venturi"]["p50_ms"], lat[best]["p50_ms"]
        add(
            "pickup p50 <= half the best peer's",
            v <= p / 2,
            f"{v:.2f} ms vs {best} {p:.2f} ms ({v / p:.2f}x)",
        )
        if "pgqueuer" in lat:
            v, p = lat["venturi"]["p99_ms"], lat["pgqueuer"]["p99_ms"]
            add("pickup p99 below pgqueuer's", v < p, f"{v:.2f} ms vs {p:.2f} ms")
    if "venturi" in results.get("index_health", {}):
        h = results["index_health"]["venturi"]
        add(
            f"drain with {h['big']['pending']:,} pending >= 80% of {h['small']['pending']:,}",
            h["ratio"] >= 0.8,
            f"{h['ratio']:.0%} ({h['big']['jobs_per_s']:,.0f} vs {h['small']['jobs_per_s']:,.0f} jobs/s)",
        )
    if "venturi_rss" in results:
        r = results["venturi_rss"]
        add(
            f"worker peak RSS <= 60 MB draining {r['jobs']:,} jobs",
            r["peak_rss_mb"] <= 60 if r["jobs"] >= 100_000 else None,
            f"{r['peak_rss_mb']:.1f} MB"
            + ("" if r["jobs"] >= 100_000 else " (quick mode: fewer than 100,000 jobs)"),
        )
    if "ceiling" in results and "drain" in results:
        for level in LEVELS:
            c = ceiling_run(results, 1, level)
            v = drain_at(results, "venturi", level)[0]
            if c and v == v:
                add(
                    f"drain c={level} within 2x of the raw-SQL ceiling "
                    f"(1 client, {level} row(s) per claim, {c['shape']})",
                    v / c["jobs_per_s"] >= 0.5,
                    f"{v / c['jobs_per_s']:.2f} of it ({v:,.0f} vs {c['jobs_per_s']:,.0f} jobs/s)",
                )
    return out


def evaluate_16(
    results: dict[str, Any], names: list[str], extras: dict[str, Any]
) -> list[dict[str, Any]]:
    """Issue 16's targets: those this run measures, and those of the scripts whose JSON
    was given (--bulk-json, --scale-json, --steady-json, --pooler-json); n/a otherwise."""
    out: list[dict[str, Any]] = []

    def add(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": f"[16] {target}", "met": met, "measured": measured})

    if "venturi" not in names:
        return out
    if "drain" in results and "pgqueuer" in names:
        for level in (10, 1, 32):
            v = drain_at(results, "venturi", level)[0]
            p, label = fastest_peer(results, ["pgqueuer"], level)
            got = v / p if p == p and p else float("nan")
            add(
                f"1. drain c={level} >= 2x pgqueuer's fastest configuration",
                got >= 2 if got == got else None,
                f"{times(got, 2)} ({v:,.0f} vs {p:,.0f} jobs/s, {label})",
            )
    if "pickup_latency" in results and "pgqueuer" in names:
        lat = results["pickup_latency"]
        v, p = lat["venturi"], lat["pgqueuer"]
        add(
            "2. pickup p50 <= 0.5x pgqueuer's, p99 below it",
            v["p50_ms"] <= 0.5 * p["p50_ms"] and v["p99_ms"] < p["p99_ms"],
            f"p50 {v['p50_ms']:.2f} vs {p['p50_ms']:.2f} ms ({v['p50_ms'] / p['p50_ms']:.2f}x), "
            f"p99 {v['p99_ms']:.2f} vs {p['p99_ms']:.2f} ms",
        )
    if "bulk_enqueue" in results and "pgqueuer" in names:
        v = results["bulk_enqueue"]["venturi"]["jobs_per_s"]
        p = results["bulk_enqueue"]["pgqueuer"]["jobs_per_s"]
        add(
            "3. bulk enqueue >= 2x pgqueuer",
            v / p >= 2,
            f"{times(v / p, 2)} ({v:,.0f} vs {p:,.0f})",
        )
    return out + scenario_targets(names, extras)


def scenario_targets(names: list[str], extras: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 16's targets judged by the scenarios' own JSON (n/a where none was given),
    and target 7, the peers in this run."""
    out: list[dict[str, Any]] = []

    def add(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": f"[16] {target}", "met": met, "measured": measured})

    bulk = extras.get("bulk")
    if bulk:
        most = max(r["jobs"] for r in bulk["runs"])
        big = [r for r in bulk["runs"] if r["per_call"] == r["jobs"] == most]
        rate = {
            path: statistics.median(r["jobs_per_s"] for r in big if r["path"] == path)
            for path in {r["path"] for r in big}
        }
        add(
            f"3. {big[0]['jobs']:,} jobs in one call, against the raw COPY of the rows",
            None,
            f"enqueue_many {rate.get('copy', float('nan')):,.0f} jobs/s "
            f"(INSERT path {rate.get('insert', float('nan')):,.0f}), raw COPY "
            f"{rate.get('raw', float('nan')):,.0f} ({bulk['commit']})",
        )
    else:
        add("3. one-call bulk vs raw COPY", None, "run benchmarks.scenarios.bulk, pass --bulk-json")
    for key, number, script in (
        ("scale", 4, "benchmarks.scenarios.scale"),
        ("steady", 5, "benchmarks.scenarios.steady"),
    ):
        got = extras.get(key)
        if not got:
            add(f"{number}. ({script})", None, f"not run: pass --{key}-json")
            continue
        for t in got.get("targets", []):
            add(f"{number}. {t['target']}", t["met"], f"{script} on {got['commit']}")
    pooler = extras.get("pooler")
    if pooler:
        runs = {r["config"]: r for r in pooler["runs"]}
        pooled, direct = runs.get("pooled+listen"), runs.get("direct")
        if pooled:
            extra = ""
            if direct and direct["jobs_per_s"]:
                extra = (
                    f", direct ({direct['processes']} processes) {direct['jobs_per_s']:,.0f} "
                    f"jobs/s: {pooled['jobs_per_s'] / direct['jobs_per_s']:.2f}x"
                )
            add(
                f"6. {pooled['processes']} processes x c={pooled['concurrency']} through a "
                f"pool of {pooler['args']['pool']} drain {pooled['jobs']:,} jobs, each once",
                bool(pooled["every_job_once"]),
                f"{pooled['jobs_per_s']:,.0f} jobs/s through pgbouncer{extra} ({pooler['commit']})",
            )
    else:
        add(
            "6. behind PgBouncer (benchmarks.scenarios.pooler)", None, "not run: pass --pooler-json"
        )
    ran = [p for p in ("chancy", "dbos", "oban") if p in names]
    add(
        "7. more peers in the same run",
        len(ran) == 3,
        f"ran: {', '.join(ran) or 'none'}; left out: "
        + ("; ".join(f"{k} ({why})" for k, why in LEFT_OUT.items()) or "none"),
    )
    return out
