"""Workflows against DBOS and chancy, and what a workflow costs venturi (issue 23, item 4).

Run by ``benchmarks.compare`` (``--workflows`` alone, or as the ``workflows`` step of a
full run), on the databases it made for each system:

- **workflows/s**: N workflows of a scenario enqueued up front, then one worker process
  at concurrency c runs them all. ``three``: three recorded steps in a row; ``fanout``: a
  parent that starts ten children and gathers their results. The rate is N over the
  time from the first workflow's start (``probe.begin``, in the worker) to the N-th
  workflow's end (its last code ran: ``probe.report``). Systems alternate per round.
- **statements per recorded step** (venturi): a proxy (``benchmarks.tools.pgwire``) counts
  the statements the worker sends while it runs M plain jobs, then M workflows of one
  step, then M of three, at c=1; (three - one) / (2 M) is what recording a step costs,
  and the per-statement difference from the plain jobs shows what each one is.
- **waiting jobs** (venturi): the c=32 drain of D pending jobs with W jobs in status
  ``waiting`` in the table (seeded by ``maintenance/jobs_seed_waiting``) against the same
  drain with none.

The venturi parts need SPEC 12's workflow code; without it
(``benchmarks.systems.venturi_wf.available()``)
they report "venturi workflows not available" and the peers still run.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks import systems
from benchmarks.common import log
from benchmarks.harness import Bench, run_worker
from benchmarks.probe import KIND
from benchmarks.systems import venturi_wf
from benchmarks.tools import pgwire
from venturi import sql

SYSTEMS = ("venturi", "chancy", "dbos")
SCENARIOS = ("three", "fanout")
TARGETS = {"dbos": 10.0, "chancy": 2.0}  # venturi's workflows/s >= this many times the peer's


@dataclass(frozen=True)
class WfPlan:
    three: int  # three-step workflows per run
    fanout: int  # fan-out workflows (ten children each) per run
    levels: tuple[int, ...]  # concurrencies
    repeat: int  # rounds (median reported)
    timeout: float  # a run still going after this many seconds is cut short
    count_jobs: int  # jobs (and workflows) per statement-count run, c=1
    waiting: int  # waiting jobs beside the pending ones
    waiting_drain: int  # jobs drained at c=32, with and without the waiting ones


QUICK = WfPlan(
    three=300,
    fanout=30,
    levels=(10,),
    repeat=1,
    timeout=60.0,
    count_jobs=300,
    waiting=100_000,
    waiting_drain=2_000,
)
FULL = WfPlan(
    three=1_000,
    fanout=100,
    levels=(10, 32),
    repeat=3,
    timeout=300.0,
    count_jobs=2_000,
    waiting=1_000_000,
    waiting_drain=20_000,
)

# Each system's configurations per run: (label, worker config). For DBOS both polling
# intervals are tried (its docs ask only for a positive value); the faster counts.
CONFIGS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "venturi": [("Worker(concurrency=c)", {})],
    "chancy": [
        (
            "Queue(concurrency=c, executor=Async, eager_polling=True, polling_interval=1), "
            "WorkflowPlugin(polling_interval=1), Leadership(poll_interval=1)",
            {},
        )
    ],
    "dbos": [
        (
            f"async workflows and steps, queues worker_concurrency=c (parents, children), "
            f"polling_interval_sec={poll}, get_result(polling_interval_sec={poll})",
            {"poll": poll},
        )
        for poll in (0.01, 0.001)
    ],
}


class Workflows:
    """The scenario's runs, on a ``harness.Bench``'s databases."""

    def __init__(self, bench: Bench, plan: WfPlan) -> None:
        self.bench = bench
        self.plan = plan
        self.names = [n for n in SYSTEMS if n in bench.names]
        self.clients: dict[str, Any] = {}

    def _spec(self, system: str, dsn: str, cfg: dict[str, Any], target: int) -> dict[str, Any]:
        return {
            "system": system,
            "dsn": dsn,
            "cfg": cfg,
            "mode": "drain",
            "target": target,
            "loop": self.bench.loop,
            "timeout": self.plan.timeout,
        }

    async def once(
        self, name: str, scenario: str, level: int, cfg: dict[str, Any]
    ) -> dict[str, Any]:
        n = getattr(self.plan, scenario)
        client = self.clients[name]
        await client.reset()
        await client.enqueue_workflows(scenario, n)
        await client.analyze()
        await self.bench.checkpoint(name)
        spec = self._spec(
            f"{name}-wf",
            self.bench.dsns[name],
            {**cfg, "concurrency": level, "scenario": scenario},
            n,
        )
        r = await run_worker(spec)
        if r["t_begin"] is None or r["count"] == 0:
            raise RuntimeError(
                f"{name} {scenario}: no workflow finished in {self.plan.timeout:.0f} s"
            )
        end = r["t_target"] or r["t_last"]
        window = end - r["t_begin"]
        return {
            "workflows": r["count"],
            "of": n,
            "seconds": window,
            "workflows_per_s": r["count"] / window if window > 0 else float("nan"),
            "cut_short": r["t_target"] is None,
            "startup_s": r["t_begin"] - r["t_start"],
            "peak_rss_mb": r["maxrss_kb"] / 1024,
            "load_average": os.getloadavg()[0],
        }

    async def rates(self) -> dict[str, Any]:
        runs: dict[str, list[dict[str, Any]]] = {}
        names = [n for n in self.names if n != "venturi" or venturi_wf.available()]
        for rnd in range(self.plan.repeat):
            for level in self.plan.levels:
                for scenario in SCENARIOS:
                    for name in rotate(names, rnd):
                        for label, cfg in CONFIGS[name]:
                            r = await self.once(name, scenario, level, cfg)
                            r["config"] = label.replace("=c", f"={level}")
                            key = f"{name}|{scenario}|c{level}|{label}"
                            runs.setdefault(key, []).append(r)
                            log(
                                f"  round {rnd + 1} {name} {scenario} c={level}: "
                                f"{r['workflows_per_s']:,.1f} workflows/s"
                                + (" (cut short)" if r["cut_short"] else "")
                                + (f" [{cfg}]" if cfg else "")
                            )
        out: dict[str, Any] = {}
        for key, rs in runs.items():
            # "c<level>", a str: named apart from the loops' int level above.
            name, scenario, clevel, _label = key.split("|", 3)
            best = sorted(rs, key=lambda r: r["workflows_per_s"])[len(rs) // 2]
            entry = {**best, "runs": [r["workflows_per_s"] for r in rs]}
            slot = out.setdefault(name, {}).setdefault(scenario, {})
            # Several configurations of one system: the fastest counts.
            if clevel not in slot or entry["workflows_per_s"] > slot[clevel]["workflows_per_s"]:
                slot[clevel] = entry
            slot.setdefault("all", []).append({**entry, "level": clevel})
        return out

    async def statements(self) -> dict[str, Any]:
        """Statements the worker sends for M plain jobs, then M workflows of one step and
        M of three, at c=1. (three - one) / 2M is what each recorded step adds; one -
        plain also holds what a workflow's run costs once (reading its recorded steps,
        say)."""
        bench, m = self.bench, self.plan.count_jobs
        host, port = _host_port(bench.dsns["venturi"])
        counter = pgwire.Counter(host, port)
        await counter.start()
        out: dict[str, Any] = {"jobs": m}
        try:
            await bench.fill("venturi", m)
            counter.reset()
            spec = self._spec("venturi", counter.dsn(bench.dsns["venturi"]), {"concurrency": 1}, m)
            out["plain"] = _tally(counter, await run_worker(spec), m)
            log(f"  plain jobs: {out['plain']['per_job']:.2f} statements per job at c=1")
            if not venturi_wf.available():
                out["note"] = venturi_wf.NOT_AVAILABLE
                return out
            client = self.clients["venturi"]
            # The fan-out too (a tenth as many: eleven jobs and two parent runs each), for
            # what one costs, statement by statement.
            for scenario, n in (("one", m), ("three", m), ("fanout", max(m // 10, 1))):
                await client.reset()
                await client.enqueue_workflows(scenario, n)
                await client.analyze()
                counter.reset()
                cfg = {"concurrency": 1, "scenario": scenario}
                spec = self._spec("venturi-wf", counter.dsn(bench.dsns["venturi"]), cfg, n)
                out[scenario] = _tally(counter, await run_worker(spec), n)
            out["per_step"] = (out["three"]["total"] - out["one"]["total"]) / (2 * m)
            out["first_step"] = (out["one"]["total"] - out["plain"]["total"]) / m
            out["grown"] = _grown(out["plain"]["by_statement"], out["three"]["by_statement"], m)
            log(
                f"  recorded steps: {out['per_step']:.3f} statements per step, the first "
                f"{out['first_step']:.3f}; per workflow of three: {out['grown']}"
            )
        finally:
            await counter.close()
        return out

    async def waiting(self) -> dict[str, Any]:
        """The c=32 drain with W waiting jobs in the table against the same with none."""
        if not venturi_wf.available():
            return {"note": venturi_wf.NOT_AVAILABLE}
        bench, plan = self.bench, self.plan
        conn = self.clients["venturi"].conn
        schema = self.clients["venturi"].schema

        async def seed() -> None:
            await conn.execute(
                sql.statement("maintenance/jobs_seed_waiting", schema), plan.waiting, KIND
            )

        cfg = {"concurrency": 32}
        label = "Worker(concurrency=32)"
        none: list[float] = []
        many: list[float] = []
        d = plan.waiting_drain
        # At least two rounds, the order swapped each round: the first drain after the
        # schema was made pays for cold caches.
        for rnd in range(max(plan.repeat, 2)):
            for seeded in (rnd % 2 == 1, rnd % 2 == 0):
                r = await bench.drain("venturi", label, cfg, d, d, seed=seed if seeded else None)
                (many if seeded else none).append(r["jobs_per_s"])
            log(
                f"  drain of {d:,} at c=32: {none[-1]:,.0f} jobs/s with no waiting job, "
                f"{many[-1]:,.0f} with {plan.waiting:,}"
            )
        small, big = statistics.median(none), statistics.median(many)
        return {
            "waiting": plan.waiting,
            "drained": d,
            "none": small,
            "with_waiting": big,
            "ratio": big / small,
            "runs": {"none": none, "with_waiting": many},
        }


def rotate(names: list[str], k: int) -> list[str]:
    k %= max(len(names), 1)
    return names[k:] + names[:k]


def _host_port(dsn: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(dsn)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def _grown(before: dict[str, int], after: dict[str, int], jobs: int) -> dict[str, float]:
    """Statements run more often per job in ``after`` than in ``before`` (per job)."""
    out = {}
    for name in sorted(set(before) | set(after)):
        delta = (after.get(name, 0) - before.get(name, 0)) / jobs
        if abs(delta) >= 0.05:
            out[name] = round(delta, 2)
    return out


def _tally(counter: pgwire.Counter, r: dict[str, Any], jobs: int) -> dict[str, Any]:
    total = counter.total()
    return {
        "jobs": jobs,
        "total": total,
        "per_job": total / jobs,
        "parses": counter.parses,
        "jobs_seen": r["count"],
        "by_statement": dict(counter.executed.most_common()),
    }


async def measure(bench: Bench, plan: WfPlan) -> None:
    """The ``workflows`` step of ``benchmarks.compare``: fills ``bench.results['workflows']``."""
    wf = Workflows(bench, plan)
    out: dict[str, Any] = {"plan": asdict(plan), "systems": wf.names}
    if "venturi" in wf.names and not venturi_wf.available():
        out["venturi_note"] = venturi_wf.NOT_AVAILABLE
        log(f"  {venturi_wf.NOT_AVAILABLE}: the peers run alone")
    for name in wf.names:
        client = systems.client(f"{name}-wf", bench.dsns[name])
        await client.open()
        await client.install()
        wf.clients[name] = client
    bench.results["workflows"] = out
    steps: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [("rates", wf.rates)]
    if "venturi" in wf.names:
        steps += [("statements", wf.statements), ("waiting", wf.waiting)]
    try:
        for key, step in steps:
            try:
                out[key] = await step()
            except Exception as exc:  # one broken part should not lose the others
                log(f"  ! workflows {key} failed: {exc}")
                out.setdefault("errors", {})[key] = str(exc)
    finally:
        for client in wf.clients.values():
            await client.close()


# --- reporting -------------------------------------------------------------------------


def _rate(out: dict[str, Any], name: str, scenario: str, level: int) -> float | None:
    got = out.get("rates", {}).get(name, {}).get(scenario, {}).get(f"c{level}")
    return got["workflows_per_s"] if got else None


def report(results: dict[str, Any]) -> list[str]:
    out = results.get("workflows")
    if not out:
        return []
    plan, names = out["plan"], out["systems"]
    lines = [
        "",
        f"workflows (issue 23; {plan['three']:,} three-step, {plan['fanout']:,} fan-out of ten per run):",
    ]
    if "venturi_note" in out:
        lines.append(f"  {out['venturi_note']}")
    for level in plan["levels"]:
        for scenario in SCENARIOS:
            cells = []
            for name in names:
                rate = _rate(out, name, scenario, level)
                cells.append(f"{name} {rate:,.1f}" if rate is not None else f"{name} -")
            lines.append(f"  {scenario:<6} c={level:<2} workflows/s: " + ", ".join(cells))
    for name in names:
        for scenario in SCENARIOS:
            for r in out.get("rates", {}).get(name, {}).get(scenario, {}).get("all", []):
                short = " (cut short)" if r["cut_short"] else ""
                lines.append(
                    f"    {name} {scenario} c={r['level'][1:]}: {r['workflows_per_s']:,.1f}/s{short}, "
                    f"{r['config']}"
                )
    st = out.get("statements")
    if st:
        lines.append(
            f"  statements the worker sent, c=1, {st['jobs']:,} jobs: plain "
            f"{st['plain']['per_job']:.2f} per job"
            + (
                f", one-step {st['one']['per_job']:.2f} and three-step "
                f"{st['three']['per_job']:.2f} per workflow: {st['per_step']:.3f} per "
                f"recorded step, the first {st['first_step']:.3f}"
                if "per_step" in st
                else f" ({st.get('note', '')})"
            )
        )
        if st.get("grown"):
            lines.append(
                "    per three-step workflow, beyond a plain job: "
                + ", ".join(f"{k} {v:+.2f}" for k, v in st["grown"].items())
            )
        if "fanout" in st:
            f = st["fanout"]
            lines.append(
                f"    per fan-out of ten (parent and children), {f['per_job']:.1f} statements: "
                + ", ".join(
                    f"{k} {v / f['jobs']:.2f}"
                    for k, v in f["by_statement"].items()
                    if v >= f["jobs"] / 2
                )
            )
    wt = out.get("waiting")
    if wt and "ratio" in wt:
        lines.append(
            f"  drain of {wt['drained']:,} at c=32: {wt['none']:,.0f} jobs/s with no waiting "
            f"job, {wt['with_waiting']:,.0f} with {wt['waiting']:,} waiting ({wt['ratio']:.0%})"
        )
    for key, error in out.get("errors", {}).items():
        lines.append(f"  workflows {key} FAILED: {error.splitlines()[0] if error else '?'}")
    return lines


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 23's benchmark targets, MET / MISSED, or n/a with the reason."""
    out = results.get("workflows")
    if not out or "venturi" not in out["systems"]:
        return []
    targets: list[dict[str, Any]] = []
    note = out.get("venturi_note")

    def add(target: str, met: bool | None, measured: str) -> None:
        targets.append({"target": f"[23] 4. {target}", "met": met, "measured": measured})

    for peer, need in TARGETS.items():
        if peer not in out["systems"]:
            continue
        for level in out["plan"]["levels"]:
            for scenario in SCENARIOS:
                what = f"{scenario} workflows/s at c={level} >= {need:g}x {peer}"
                v, p = _rate(out, "venturi", scenario, level), _rate(out, peer, scenario, level)
                if note or v is None or not p:
                    add(what, None, note or f"not measured ({peer} {p})")
                    continue
                add(what, v / p >= need, f"{v / p:.2f}x ({v:,.1f} vs {p:,.1f} workflows/s)")
    st = out.get("statements", {})
    if "per_step" in st:
        # Periodic statements (heartbeat, timers) ride along in both runs; allow 2% for them.
        add(
            "a recorded step costs one statement",
            st["per_step"] <= 1.02,
            f"{st['per_step']:.3f} statements per step ({st['jobs']:,} three-step workflows "
            f"vs as many one-step, c=1; the first step {st['first_step']:.3f})",
        )
    else:
        add("a recorded step costs one statement", None, note or "not measured")
    wt = out.get("waiting", {})
    if "ratio" in wt:
        add(
            f"drain c=32 with {wt['waiting']:,} waiting jobs >= 90% of none",
            wt["ratio"] >= 0.9 if wt["waiting"] >= 1_000_000 else None,
            f"{wt['ratio']:.0%} ({wt['with_waiting']:,.0f} vs {wt['none']:,.0f} jobs/s)"
            + ("" if wt["waiting"] >= 1_000_000 else " (quick mode: fewer than 1,000,000)"),
        )
    else:
        add("drain c=32 with 1,000,000 waiting jobs >= 90% of none", None, note or "not measured")
    return targets
