"""venturi against procrastinate and pgqueuer, on one PostgreSQL, in one run (issue 4).

    python -m benchmarks.compare [--quick] [--json out.json]

Each system gets a database of its own on the same server (created here and dropped at
the end). Measurements alternate between the systems (the order rotates each round) so
that drift on the machine hits all of them alike. Every worker runs in a subprocess
(``benchmarks.worker_proc``) with the same event loop, so its CPU time and peak RSS are
its own. README.md explains each number, the peer configurations and the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import ceiling, systems, workflows
from venturi import sql

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _oban_missing() -> str | None:
    """Why oban cannot run here, or None: every release needs Python >= 3.12."""
    if sys.version_info < (3, 12):
        return (
            "pip: every release (0.5.0-0.7.0) requires Python >= 3.12; this run is on "
            f"{sys.version_info[0]}.{sys.version_info[1]}"
        )
    if importlib.util.find_spec("oban") is None:
        return "not installed (pip install oban; the bench extra brings it on Python >= 3.12)"
    return None


# Peers that cannot run here, and why (pip's own answer on this machine).
LEFT_OUT = {name: why for name, why in (("oban", _oban_missing()),) if why}
SYSTEMS = tuple(
    n
    for n in ("venturi", "procrastinate", "pgqueuer", "chancy", "dbos", "oban")
    if n not in LEFT_OUT
)
PEERS = SYSTEMS[1:]
LEVELS = (1, 10, 32)


@dataclass(frozen=True)
class Plan:
    """How much of everything a run does."""

    repeat: int  # rounds of the enqueue and drain measurements (median reported)
    bulk_jobs: int  # jobs per bulk-enqueue measurement...
    bulk_batch: int  # ...in calls of this many jobs, each its own transaction
    single_jobs: int  # one job per call, each its own transaction
    drain_jobs: int  # no-op jobs drained per drain measurement
    latency_samples: int  # single jobs enqueued to an idle worker
    health_small: int  # pending rows of the "small table" drain
    health_big: int  # pending rows of the "big table" drain
    health_drain: int  # jobs drained from each of the two
    rss_jobs: int  # jobs venturi drains for its peak-RSS figure
    ceiling_fill: int  # pending rows the raw-SQL ceiling claims from
    ceiling_seconds: float  # duration of each ceiling configuration
    drain_timeout: float  # a drain still running after this many seconds is cut short
    checkpoint: bool  # CHECKPOINT before each timed run (steadier, slower)


QUICK = Plan(
    repeat=1,
    bulk_jobs=10_000,
    bulk_batch=1_000,
    single_jobs=300,
    drain_jobs=1_500,
    latency_samples=40,
    health_small=10_000,
    health_big=100_000,
    health_drain=1_000,
    rss_jobs=20_000,
    ceiling_fill=100_000,
    ceiling_seconds=1.0,
    drain_timeout=10.0,
    checkpoint=False,
)

FULL = Plan(
    repeat=3,
    bulk_jobs=20_000,
    bulk_batch=1_000,
    single_jobs=2_000,
    drain_jobs=20_000,
    latency_samples=200,
    health_small=10_000,
    health_big=1_000_000,
    health_drain=10_000,
    rss_jobs=100_000,
    ceiling_fill=1_000_000,
    ceiling_seconds=8.0,
    drain_timeout=300.0,
    checkpoint=True,
)

# Worker configurations per concurrency level: (label, config for systems.WORKERS).
# "Concurrency N" means at most about N jobs in flight in one worker process.
DRAIN_CONFIGS: dict[str, dict[int, list[tuple[str, dict[str, Any]]]]] = {
    "venturi": {n: [(f"Worker(concurrency={n})", {"concurrency": n})] for n in LEVELS},
    "procrastinate": {
        n: [
            (
                f"run_worker_async(concurrency={n}), PsycopgConnector default pool (4), "
                "listen_notify",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "chancy": {
        n: [
            (
                f"Queue(concurrency={n}, executor=Async, eager_polling=True, polling_interval=1)",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "dbos": {
        n: [
            (
                f"queue worker_concurrency={n}, polling_interval_sec=0.01, async workflow",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "oban": {
        n: [
            (
                f"Oban(queues={{'bench': {n}}}), create_pool default (10), LISTEN/NOTIFY, "
                "debounce 5 ms",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "pgqueuer": {
        1: [("1 consumer, batch_size=1, drain mode", {"consumers": 1, "batch_size": 1})],
        10: [
            ("1 consumer, batch_size=10, drain mode", {"consumers": 1, "batch_size": 10}),
            (
                "1 consumer, batch_size=5, max_concurrent_tasks=10, drain mode",
                {"consumers": 1, "batch_size": 5, "max_concurrent_tasks": 10},
            ),
        ],
        32: [
            (
                "1 consumer, batch_size=16, max_concurrent_tasks=32, drain mode",
                {"consumers": 1, "batch_size": 16, "max_concurrent_tasks": 32},
            )
        ],
    },
}
for _levels in DRAIN_CONFIGS["pgqueuer"].values():
    for _label, _cfg in _levels:
        _cfg["drain"] = True

# A peer's own fastest documented configuration, when it is not one of the levels above:
# pgqueuer's benchmark tool (tools/benchmark.py, drain strategy) runs five PgQueuer
# consumers of batch size 10 in one process on uvloop.
OWN_BEST: dict[str, tuple[str, dict[str, Any]]] = {
    "pgqueuer": (
        "5 consumers x batch_size=10, drain mode (its benchmark tool's configuration)",
        {"consumers": 5, "batch_size": 10, "drain": True},
    ),
}

LATENCY_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "venturi": ("Worker(concurrency=10)", {"concurrency": 10}),
    "procrastinate": ("run_worker_async(concurrency=10), listen_notify", {"concurrency": 10}),
    "pgqueuer": ("1 consumer, batch_size=10, continuous mode", {"consumers": 1, "batch_size": 10}),
    "chancy": (
        "Queue(concurrency=10, executor=Async, eager_polling=True, polling_interval=1)",
        {"concurrency": 10},
    ),
    "dbos": ("queue worker_concurrency=10, polling_interval_sec=0.01", {"concurrency": 10}),
    "oban": ("Oban(queues={'bench': 10}), LISTEN/NOTIFY", {"concurrency": 10}),
}


def relaxed() -> None:
    """venturi's drain and pickup configurations with ``synchronous_commit=False``
    (``--no-synchronous-commit``), named so in the output."""
    suffix = ", synchronous_commit=False"
    for level, configs in DRAIN_CONFIGS["venturi"].items():
        DRAIN_CONFIGS["venturi"][level] = [
            (label[:-1] + suffix + ")", {**cfg, "synchronous_commit": False})
            for label, cfg in configs
        ]
    label, cfg = LATENCY_CONFIGS["venturi"]
    LATENCY_CONFIGS["venturi"] = (label[:-1] + suffix + ")", {**cfg, "synchronous_commit": False})


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(
        self, plan: Plan, names: list[str], admin_dsn: str, loop: str, worker_timeout: float
    ) -> None:
        self.plan = plan
        self.names = names
        # The index-health step's systems (--health-systems): filling a million jobs
        # takes DBOS, one enqueue per job, most of an hour here.
        self.health_names = list(names)
        self.admin_dsn = admin_dsn
        self.loop = loop
        self.worker_timeout = worker_timeout
        self.tag = f"bench_venturi_{os.getpid()}"
        self.dsns: dict[str, str] = {}
        self.clients: dict[str, Any] = {}
        self.monitors: dict[str, Any] = {}
        self.results: dict[str, Any] = {}
        self.rss: dict[str, list[float]] = {n: [] for n in names}
        self.step_seconds: dict[str, float] = {}
        self._round = 0
        self.psycopg_client: Any = None
        self.wf_plan = workflows.QUICK if plan.checkpoint is False else workflows.FULL

    # --- databases ---------------------------------------------------------------

    def _dsn(self, database: str) -> str:
        parts = self.admin_dsn.rsplit("/", 1)
        return f"{parts[0]}/{database}"

    async def setup(self) -> None:
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            for name in self.names:
                db = f"{self.tag}_{name}"
                await admin.execute(sql.database_statement("database_drop", db))
                await admin.execute(sql.database_statement("database_create", db))
                self.dsns[name] = self._dsn(db)
        finally:
            await admin.close()
        for name in self.names:
            client = systems.CLIENTS[name](self.dsns[name])
            await client.open()
            await client.install()
            self.clients[name] = client
            self.monitors[name] = await asyncpg.connect(self.dsns[name])
        if "venturi" in self.names:
            # venturi's enqueue on psycopg 3 too, on venturi's database.
            self.psycopg_client = systems.VenturiPsycopgClient(self.dsns["venturi"])
            await self.psycopg_client.open()

    async def teardown(self) -> None:
        extra = [self.psycopg_client] if self.psycopg_client is not None else []
        for conn in [*self.clients.values(), *self.monitors.values(), *extra]:
            with contextlib.suppress(Exception):
                await conn.close()
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            for name in self.dsns:
                await admin.execute(sql.database_statement("database_drop", f"{self.tag}_{name}"))
        finally:
            await admin.close()

    async def server_facts(self) -> dict[str, Any]:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            facts = {"version": await conn.fetchval("SELECT version()")}
            for setting in ("fsync", "synchronous_commit", "shared_buffers", "max_connections"):
                facts[setting] = await conn.fetchval(f"SHOW {setting}")
            return facts
        finally:
            await conn.close()

    async def counters(self, name: str) -> tuple[int, int]:
        """(commits in this database, cluster WAL position): what a drain cost the server."""
        mon = self.monitors[name]
        await mon.execute("SELECT pg_stat_clear_snapshot()")
        commits = await mon.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        wal = await mon.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return int(commits), int(wal)

    async def fill(self, name: str, n: int) -> None:
        client = self.clients[name]
        await client.reset()
        chunk = 10_000
        for start in range(0, n, chunk):
            await client.enqueue_bulk(start, min(chunk, n - start))
        await client.analyze()

    def order(self) -> list[str]:
        """The systems, rotated one step further each round."""
        k = self._round % len(self.names)
        self._round += 1
        return self.names[k:] + self.names[:k]

    # --- workers -------------------------------------------------------------------

    def _spec(self, name: str, cfg: dict[str, Any], mode: str, target: int) -> str:
        timeout = self.plan.drain_timeout if mode == "drain" else self.worker_timeout
        return json.dumps(
            {
                "system": name,
                "dsn": self.dsns[name],
                "cfg": cfg,
                "mode": mode,
                "target": target,
                "loop": self.loop,
                "timeout": timeout,
            }
        )

    async def _spawn(self, spec: str, stdin: int) -> tuple[Any, Any]:
        errors = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.worker_proc",
            spec,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
            cwd=str(ROOT),
            env=env,
        )
        return proc, errors

    @staticmethod
    def _failed(proc: Any, errors: Any, what: str) -> RuntimeError:
        errors.seek(0)
        tail = errors.read().decode(errors="replace")[-3000:]
        return RuntimeError(f"{what}: worker exited with {proc.returncode}:\n{tail}")

    async def drain(
        self,
        name: str,
        label: str,
        cfg: dict[str, Any],
        fill: int,
        target: int,
        seed: Callable[[], Any] | None = None,
    ) -> dict[str, Any]:
        """Fill ``fill`` pending jobs (then ``seed()`` more rows, if given), start a worker,
        time the first ``target`` jobs."""
        await self.fill(name, fill)
        if seed is not None:
            await seed()
            await self.clients[name].analyze()
        await self.checkpoint(name)
        commits0, wal0 = await self.counters(name)
        proc, errors = await self._spawn(
            self._spec(name, cfg, "drain", target), asyncio.subprocess.DEVNULL
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise self._failed(proc, errors, f"{name} drain {label}")
        errors.close()
        r = json.loads(out.decode().strip().splitlines()[-1])
        await asyncio.sleep(0.3)  # exited backends flush their statistics
        commits1, wal1 = await self.counters(name)
        unfinished = await self.clients[name].unfinished()
        jobs = r["count"]
        if jobs < 2:
            raise RuntimeError(f"{name} drain {label}: saw {jobs} of {target} jobs")
        if r["t_target"] is None:
            log(
                f"  ! {name} {label}: cut short after {self.plan.drain_timeout:.0f} s "
                f"with {jobs:,} of {target:,} jobs; the rate is over those"
            )
        if unfinished and fill == target and r["t_target"] is not None:
            log(f"  ! {name} {label}: {unfinished} job(s) still unfinished after the worker exited")
        window = (r["t_target"] or r["t_last"]) - r["t_first"]
        rss = r["maxrss_kb"] / 1024
        self.rss[name].append(rss)
        return {
            "config": label,
            "pending": fill,
            "jobs": jobs,
            "seconds": window,
            "jobs_per_s": (jobs - 1) / window if window > 0 else float("nan"),
            "cut_short": r["t_target"] is None,
            "cpu_us_per_job": (
                r["cpu_window"] / max(target - 1, 1) * 1e6 if r["cpu_window"] else None
            ),
            "peak_rss_mb": rss,
            "commits_per_job": (commits1 - commits0) / jobs,
            "wal_bytes_per_job": (wal1 - wal0) / jobs,
            "unfinished_after": unfinished,
            "startup_s": r["t_first"] - r["t_start"],
            "load_average": os.getloadavg()[0],
        }

    async def latency(self, name: str, label: str, cfg: dict[str, Any]) -> dict[str, Any]:
        """Enqueue single jobs to an idle worker; time until each handler starts."""
        client = self.clients[name]
        await client.reset()
        proc, errors = await self._spawn(
            self._spec(name, cfg, "latency", 0), asyncio.subprocess.PIPE
        )
        seen: dict[int, asyncio.Future[float]] = {}
        final: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        ready = asyncio.Event()

        async def read() -> None:
            assert proc.stdout is not None
            while line := (await proc.stdout.readline()).decode().strip():
                if line == "ready":
                    ready.set()
                elif line.startswith("J "):
                    _, i, t = line.split()
                    fut = seen.setdefault(int(i), asyncio.get_running_loop().create_future())
                    if not fut.done():
                        fut.set_result(float(t))
                elif line.startswith("{"):
                    final.set_result(json.loads(line))

        reader = asyncio.create_task(read())
        from_commit: list[float] = []
        from_call: list[float] = []
        try:
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait([waiter, reader], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():
                waiter.cancel()
                await proc.wait()
                raise self._failed(proc, errors, f"{name} latency: no ready")
            await asyncio.sleep(0.5)
            # Job 0 is the first after start (statement preparation, cold caches): it is
            # reported on its own and left out of the percentiles.
            for i in range(self.plan.latency_samples + 1):
                # An idle gap, jittered so as not to beat with any poll interval.
                await asyncio.sleep(random.uniform(0.02, 0.06))
                fut = seen.setdefault(i, asyncio.get_running_loop().create_future())
                t0 = time.monotonic()
                await client.enqueue_one(i)
                t1 = time.monotonic()
                started = await asyncio.wait_for(fut, 30)
                from_commit.append((started - t1) * 1000)
                from_call.append((started - t0) * 1000)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            await proc.wait()
            await reader
        if proc.returncode != 0 or not final.done():
            raise self._failed(proc, errors, f"{name} latency")
        errors.close()
        r = final.result()
        self.rss[name].append(r["maxrss_kb"] / 1024)
        first, from_commit, from_call = from_commit[0], from_commit[1:], from_call[1:]
        return {
            "config": label,
            "samples": len(from_commit),
            "p50_ms": percentile(from_commit, 50),
            "p99_ms": percentile(from_commit, 99),
            "max_ms": max(from_commit),
            "first_ms": first,
            "p50_from_call_ms": percentile(from_call, 50),
            "p99_from_call_ms": percentile(from_call, 99),
            "peak_rss_mb": r["maxrss_kb"] / 1024,
        }

    # --- measurements --------------------------------------------------------------

    async def measure_enqueue(self) -> None:
        plan = self.plan
        # venturi-psycopg: venturi's enqueue on psycopg 3, measured in venturi's turn,
        # right after its asyncpg run, on the same database.
        both = [*self.names, *(["venturi-psycopg"] if self.psycopg_client else [])]
        bulk: dict[str, list[float]] = {n: [] for n in both}
        single: dict[str, list[float]] = {n: [] for n in both}
        for rnd in range(plan.repeat):
            for name in self.order():
                runs = [(name, self.clients[name])]
                if name == "venturi" and self.psycopg_client is not None:
                    runs.append(("venturi-psycopg", self.psycopg_client))
                for label, client in runs:
                    reset = self.clients[name].reset
                    await reset()
                    t0 = time.monotonic()
                    for start in range(0, plan.bulk_jobs, plan.bulk_batch):
                        await client.enqueue_bulk(
                            start, min(plan.bulk_batch, plan.bulk_jobs - start)
                        )
                    bulk[label].append(plan.bulk_jobs / (time.monotonic() - t0))
                    await reset()
                    t0 = time.monotonic()
                    for i in range(plan.single_jobs):
                        await client.enqueue_one(i)
                    single[label].append(plan.single_jobs / (time.monotonic() - t0))
                    log(
                        f"  round {rnd + 1} {label}: bulk {bulk[label][-1]:,.0f}/s, "
                        f"single {single[label][-1]:,.0f}/s"
                    )
        self.results["bulk_enqueue"] = {
            n: {"jobs_per_s": median(v), "runs": v, "batch": plan.bulk_batch}
            for n, v in bulk.items()
        }
        self.results["single_enqueue"] = {
            n: {"jobs_per_s": median(v), "runs": v} for n, v in single.items()
        }

    async def measure_latency(self) -> None:
        out: dict[str, Any] = {}
        for name in self.order():
            label, cfg = LATENCY_CONFIGS[name]
            out[name] = await self.latency(name, label, cfg)
            log(
                f"  {name}: p50 {out[name]['p50_ms']:.2f} ms, p99 {out[name]['p99_ms']:.2f} ms"
                f" ({out[name]['samples']} samples)"
            )
        self.results["pickup_latency"] = out

    async def measure_drains(self) -> None:
        plan = self.plan
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {} for n in self.names}
        jobs = plan.drain_jobs
        for rnd in range(plan.repeat):
            for level in LEVELS:
                for name in self.order():
                    configs = list(DRAIN_CONFIGS[name][level])
                    if level == LEVELS[-1] and name in OWN_BEST:
                        configs.append(OWN_BEST[name])
                    for label, cfg in configs:
                        key = (
                            "own-best"
                            if (name in OWN_BEST and label == OWN_BEST[name][0])
                            else f"c{level}:{label}"
                        )
                        r = await self.drain(name, label, cfg, jobs, jobs)
                        r["level"] = None if key == "own-best" else level
                        runs[name].setdefault(key, []).append(r)
                        log(
                            f"  round {rnd + 1} {name} {key}: {r['jobs_per_s']:,.0f} jobs/s, "
                            f"{fmt(r['cpu_us_per_job'])} us CPU/job, "
                            f"{r['commits_per_job']:.2f} commits/job"
                        )
        summary: dict[str, Any] = {}
        for name, by_key in runs.items():
            summary[name] = {}
            for key, rs in by_key.items():
                best = sorted(rs, key=lambda r: r["jobs_per_s"])[len(rs) // 2]  # the median run
                summary[name][key] = {**best, "runs": [r["jobs_per_s"] for r in rs]}
        self.results["drain"] = summary

    async def measure_health(self) -> None:
        plan = self.plan
        out: dict[str, Any] = {}
        for name in self.order():
            if name not in self.health_names:
                continue
            label, cfg = DRAIN_CONFIGS[name][10][0]
            small = await self.drain(name, label, cfg, plan.health_small, plan.health_drain)
            big = await self.drain(name, label, cfg, plan.health_big, plan.health_drain)
            out[name] = {
                "config": label,
                "small": small,
                "big": big,
                "ratio": big["jobs_per_s"] / small["jobs_per_s"],
            }
            log(
                f"  {name}: {plan.health_drain:,} of {plan.health_small:,} pending "
                f"{small['jobs_per_s']:,.0f}/s, of {plan.health_big:,} pending "
                f"{big['jobs_per_s']:,.0f}/s (ratio {out[name]['ratio']:.2f})"
            )
        self.results["index_health"] = out

    async def measure_workflows(self) -> None:
        await workflows.measure(self, self.wf_plan)

    async def measure_rss(self) -> None:
        n = self.plan.rss_jobs
        label, cfg = DRAIN_CONFIGS["venturi"][32][0]
        r = await self.drain("venturi", label, cfg, n, n)
        log(f"  venturi drained {n:,} jobs: peak RSS {r['peak_rss_mb']:.1f} MB")
        self.results["venturi_rss"] = r

    async def checkpoint(self, name: str) -> None:
        """Flush dirty buffers before a timed run, so no run pays for another's writes."""
        if self.plan.checkpoint:
            await self.monitors[name].execute("CHECKPOINT")

    async def measure_ceiling(self) -> None:
        """The statements bare: first draining the same number of pending jobs as the
        worker's drains (the like-for-like ceiling), then claiming from a big table."""
        plan = self.plan
        dsn = self.dsns["venturi"]
        client = self.clients["venturi"]
        out: list[dict[str, Any]] = []
        quick = plan.ceiling_fill < 1_000_000
        for clients, batch, shape, via_pool in ceiling_configs(quick, ceiling.can_combine()):
            await self.fill("venturi", plan.drain_jobs)
            await self.checkpoint("venturi")
            r = await ceiling.run(
                dsn,
                clients=clients,
                batch=batch,
                duration=plan.ceiling_seconds,
                shape=shape,
                via_pool=via_pool,
            )
            r["pending"] = plan.drain_jobs
            out.append(r)
            log(f"  {ceiling_label(r)}: {r['jobs_per_s']:,.0f} jobs/s")
        await client.reset()
        single = await ceiling.insert_single(dsn, jobs=plan.single_jobs)
        log(f"  job_insert bare, one per commit: {single['jobs_per_s']:,.0f} jobs/s")
        self.results["ceiling_insert"] = single
        await self.fill("venturi", plan.ceiling_fill)
        for clients, batch in [(1, 50), (4, 50)]:
            if await client.unfinished() < 40_000 * plan.ceiling_seconds:
                await self.fill("venturi", plan.ceiling_fill)
            await self.checkpoint("venturi")
            r = await ceiling.run(dsn, clients=clients, batch=batch, duration=plan.ceiling_seconds)
            r["pending"] = plan.ceiling_fill
            out.append(r)
            log(f"  {ceiling_label(r)}: {r['jobs_per_s']:,.0f} jobs/s")
        self.results["ceiling"] = out


def ceiling_configs(quick: bool, combined: bool) -> list[tuple[int, int, str, bool]]:
    """(clients, rows per claim, shape, via an asyncpg.Pool) of each like-for-like run."""
    separate = [(1, 1), (1, 10), (1, 32)] if quick else [(1, 1), (4, 1), (1, 10), (1, 32), (4, 32)]
    runs = [(c, b, "separate", False) for c, b in separate]
    shape = "separate"
    if combined:
        shape = "combined"
        runs += [(1, 1, shape, False), (1, 10, shape, False), (1, 32, shape, False)]
    # What one asyncpg.Pool acquire/release per statement costs (the worker's way).
    runs += [(1, 1, shape, True)] + ([] if quick else [(1, 32, shape, True)])
    return runs


def ceiling_label(r: dict[str, Any]) -> str:
    shape = "claim+settle" if r["shape"] == "separate" else "settle riding the claim"
    how = ", via asyncpg.Pool" if r["via_pool"] else ""
    return f"{r['clients']:>2} client(s) x {r['batch']:>2} row(s), {shape}{how}"


# --- reporting -----------------------------------------------------------------------


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"


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


def report(
    results: dict[str, Any], names: list[str], extras: dict[str, Any] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    peers = [n for n in names if n != "venturi"]
    lines: list[str] = []
    cols = ["metric", *names, *[f"v/{p[:5]}" for p in peers]]
    rows: list[list[str]] = []

    def row(metric: str, values: dict[str, float | None], digits: int = 0) -> None:
        v = values.get("venturi")
        rows.append(
            [metric]
            + [fmt(values.get(n), digits) for n in names]
            + [ratio(v, values.get(p)) for p in peers]
        )

    if "bulk_enqueue" in results:
        row(
            "bulk enqueue, jobs/s", {n: r["jobs_per_s"] for n, r in results["bulk_enqueue"].items()}
        )
        row(
            "single enqueue, jobs/s",
            {n: r["jobs_per_s"] for n, r in results["single_enqueue"].items()},
        )
        if "venturi-psycopg" in results["bulk_enqueue"]:
            # The psycopg 3 path: venturi's enqueue on psycopg beside procrastinate's,
            # which always enqueues on psycopg (pgqueuer's figure is its asyncpg one).
            for key, what in (("bulk_enqueue", "bulk"), ("single_enqueue", "single")):
                got = {n: r["jobs_per_s"] for n, r in results[key].items()}
                row(
                    f"{what} enqueue on psycopg 3, jobs/s",
                    {
                        "venturi": got["venturi-psycopg"],
                        "procrastinate": got.get("procrastinate"),
                    },
                )
    if "drain" in results:
        for level in LEVELS:
            row(f"drain c={level}, jobs/s", {n: drain_at(results, n, level)[0] for n in names})
        own = {
            n: results["drain"][n]["own-best"]["jobs_per_s"]
            for n in names
            if "own-best" in results["drain"].get(n, {})
        }
        if own:
            row("drain, peer's own best config, jobs/s", own)
        c32 = {n: _level_run(results, n, 32) for n in names}
        row("CPU us/job, drain c=32", {n: r and r["cpu_us_per_job"] for n, r in c32.items()})
        row("commits/job, drain c=32", {n: r and r["commits_per_job"] for n, r in c32.items()}, 2)
        row("WAL bytes/job, drain c=32", {n: r and r["wal_bytes_per_job"] for n, r in c32.items()})
        c1 = {n: _level_run(results, n, 1) for n in names}
        row("commits/job, drain c=1", {n: r and r["commits_per_job"] for n, r in c1.items()}, 2)
    if "pickup_latency" in results:
        lat = results["pickup_latency"]
        row("pickup latency p50, ms (lower wins)", {n: r["p50_ms"] for n, r in lat.items()}, 2)
        row("pickup latency p99, ms (lower wins)", {n: r["p99_ms"] for n, r in lat.items()}, 2)
        row("  first job after start, ms", {n: r["first_ms"] for n, r in lat.items()}, 2)
    if results.get("index_health"):
        h = results["index_health"]
        small = next(iter(h.values()))["small"]["pending"]
        big = next(iter(h.values()))["big"]["pending"]
        row(
            f"drain, {small:,} pending, jobs/s", {n: r["small"]["jobs_per_s"] for n, r in h.items()}
        )
        row(f"drain, {big:,} pending, jobs/s", {n: r["big"]["jobs_per_s"] for n, r in h.items()})
        row("  big/small", {n: r["ratio"] for n, r in h.items()}, 2)
    peak = results.get("peak_rss_mb", {})
    if peak:
        row("worker peak RSS, MB (lower wins)", peak, 1)

    widths = [max(len(r[i]) for r in [cols, *rows]) for i in range(len(cols))]
    if rows:
        lines.append(
            "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cols)
            )
        )
        lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r))
        )

    if "ceiling" in results:
        lines.append("")
        lines.append(
            "raw-SQL ceiling (venturi's own job_claim / job_complete_many_if_owned, "
            "asyncpg, no framework):"
        )
        for r in results["ceiling"]:
            lines.append(
                f"  {r.get('pending', 0):>9,} pending, {ceiling_label(r)}: "
                f"{r['jobs_per_s']:>9,.0f} jobs/s"
            )
        if "ceiling_insert" in results:
            r = results["ceiling_insert"]
            lines.append(
                f"  job_insert bare, one job per statement and commit: {r['jobs_per_s']:,.0f} jobs/s"
            )

    short = cut_short(results)
    if short:
        lines.append("")
        lines.append("cut short (the drain timeout ended them; their rate is over the jobs seen):")
        lines.extend(f"  {what}" for what in short)
    for step, error in results.get("errors", {}).items():
        lines.append(f"step {step} FAILED: {error.splitlines()[0] if error else '?'}")

    targets = evaluate(results, names)
    marks = {True: "MET   ", False: "MISSED", None: "n/a   "}
    if targets:
        lines.append("")
        lines.append("issue-4 targets:")
        for t in targets:
            lines.append(f"  {marks[t['met']]} {t['target']}: {t['measured']}")
    # A run of the workflow scenario alone (--workflows) has no issue-16 figure to judge.
    alone = not any(k in results for k in ("drain", "bulk_enqueue", "pickup_latency"))
    later = [] if alone else evaluate_16(results, names, extras or {})
    if later:
        lines.append("")
        lines.append("issue-16 targets:")
        for t in later:
            lines.append(f"  {marks[t['met']]} {t['target']}: {t['measured']}")
    lines.extend(workflows.report(results))
    wf_targets = workflows.evaluate(results)
    if wf_targets:
        lines.append("")
        lines.append("issue-23 targets (workflows):")
        for t in wf_targets:
            lines.append(f"  {marks[t['met']]} {t['target']}: {t['measured']}")
    return "\n".join(lines), targets + later + wf_targets


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


def _level_run(results: dict[str, Any], name: str, level: int) -> dict[str, Any] | None:
    best = None
    for r in results["drain"].get(name, {}).values():
        if r.get("level") == level and (best is None or r["jobs_per_s"] > best["jobs_per_s"]):
            best = r
    return best


def _ceiling(results: dict[str, Any], clients: int, batch: int) -> dict[str, Any] | None:
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
            c = _ceiling(results, 1, level)
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
        add("3. one-call bulk vs raw COPY", None, "run benchmarks.bulk, pass --bulk-json")
    for key, number, script in (
        ("scale", 4, "benchmarks.scale"),
        ("steady", 5, "benchmarks.steady"),
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
        add("6. behind PgBouncer (benchmarks.pooler)", None, "not run: pass --pooler-json")
    ran = [p for p in ("chancy", "dbos", "oban") if p in names]
    add(
        "7. more peers in the same run",
        len(ran) == 3,
        f"ran: {', '.join(ran) or 'none'}; left out: "
        + ("; ".join(f"{k} ({why})" for k, why in LEFT_OUT.items()) or "none"),
    )
    return out


def versions() -> dict[str, str]:
    out = {}
    for pkg in (
        "venturi",
        "procrastinate",
        "pgqueuer",
        "chancy",
        "dbos",
        "oban",
        "asyncpg",
        "psycopg",
        "uvloop",
        "msgspec",
    ):
        try:
            # venturi is distributed as venturi-jobs (the name venturi is another project's).
            out[pkg] = metadata.version("venturi-jobs" if pkg == "venturi" else pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def git_head() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "venturi"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty venturi/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        # A copy outside git (say, a snapshot of one commit): the caller may name it.
        return os.environ.get("VENTURI_BENCH_REV", "?")


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    plan = QUICK if args.quick else FULL
    if args.repeat:
        plan = Plan(**{**asdict(plan), "repeat": args.repeat})
    if args.drain_timeout:
        plan = Plan(**{**asdict(plan), "drain_timeout": args.drain_timeout})
    names = [n for n in SYSTEMS if n in args.systems.split(",")]
    steps: dict[str, Callable[[Bench], Any]] = {
        "enqueue": Bench.measure_enqueue,
        "latency": Bench.measure_latency,
        "drain": Bench.measure_drains,
        "health": Bench.measure_health,
        "rss": Bench.measure_rss,
        "ceiling": Bench.measure_ceiling,
        "workflows": Bench.measure_workflows,
    }
    chosen = [s for s in steps if s not in args.skip.split(",")]
    # The workflow scenario (issue 23): part of a full run; --workflows runs it alone.
    if args.workflows:
        chosen = ["workflows"]
    elif args.quick:
        chosen = [s for s in chosen if s != "workflows"]
    if "venturi" not in names:
        chosen = [s for s in chosen if s not in ("rss", "ceiling")]
    if args.workflows:
        names = [n for n in names if n in workflows.SYSTEMS]
    bench = Bench(plan, names, args.dsn, args.loop, args.worker_timeout)
    if args.wf_levels:
        levels = tuple(int(n) for n in args.wf_levels.split(","))
        bench.wf_plan = workflows.WfPlan(**{**asdict(bench.wf_plan), "levels": levels})
    if args.health_systems:
        bench.health_names = [n for n in names if n in args.health_systems.split(",")]
    started = time.monotonic()
    server = await bench.server_facts()
    log(f"venturi benchmark, {'quick' if args.quick else 'full'} mode: {', '.join(names)}")
    await bench.setup()
    try:
        for step in chosen:
            log(f"{step}: (load average {os.getloadavg()[0]:.2f})")
            t0 = time.monotonic()
            try:
                await steps[step](bench)
            except Exception as exc:  # one broken step should not lose the others
                log(f"  ! {step} failed: {exc}")
                bench.results.setdefault("errors", {})[step] = str(exc)
            bench.step_seconds[step] = time.monotonic() - t0
    finally:
        await bench.teardown()
    results = bench.results
    results["plan_drain_jobs"] = plan.drain_jobs
    results["peak_rss_mb"] = {n: max(v) for n, v in bench.rss.items() if v}
    text, targets = report(results, names, args.extras)
    elapsed = time.monotonic() - started
    machine = {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "postgres": server,
    }
    header = [
        f"venturi benchmark ({'quick' if args.quick else 'full'} mode, {elapsed:.0f} s), "
        f"venturi {git_head()}, event loop {args.loop} for every system",
        f"machine: {machine['nproc']} cores ({machine['cpu']}), {server['version'].split(' on ')[0]}, "
        f"fsync={server['fsync']}, synchronous_commit={server['synchronous_commit']}",
        f"versions: {', '.join(f'{k} {v}' for k, v in versions().items())}",
        f"sizes: {plan}",
        "",
    ]
    configs = ["", "configurations:"]
    for name in [] if args.workflows else names:
        for level in LEVELS:
            for label, _ in DRAIN_CONFIGS[name][level]:
                configs.append(f"  {name} drain c={level}: {label}")
        if name in OWN_BEST:
            configs.append(f"  {name} own best: {OWN_BEST[name][0]}")
        configs.append(f"  {name} pickup latency: {LATENCY_CONFIGS[name][0]}")
    print("\n".join(header) + text + ("" if args.workflows else "\n".join(configs)))
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


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.compare", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes; under two minutes")
    parser.add_argument("--json", metavar="PATH", help="write every figure to this JSON file")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN),
        help="an admin DSN; the benchmark creates and drops its own databases there",
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated steps to skip: "
        + ",".join(("enqueue", "latency", "drain", "health", "rss", "ceiling", "workflows")),
    )
    parser.add_argument(
        "--wf-levels",
        default="",
        help="comma-separated concurrencies of the workflow scenario (default: quick 10, "
        "full 10,32)",
    )
    parser.add_argument(
        "--workflows",
        action="store_true",
        help="run only the workflow scenario (issue 23) for venturi, chancy and dbos "
        "(sizes: --quick or full); a full run includes it",
    )
    parser.add_argument("--repeat", type=int, default=0, help="rounds (default: quick 1, full 3)")
    parser.add_argument(
        "--no-synchronous-commit",
        action="store_true",
        help="run venturi's drain and pickup workers with Worker(synchronous_commit=False)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=0.0,
        help="cut a drain short after this many seconds (default: quick 10, full 300); "
        "its rate is then over the jobs it ran, and the report lists it",
    )
    parser.add_argument(
        "--health-systems",
        default="",
        help="comma-separated subset for the index-health step (default: every system); "
        "it fills each system's table with up to 1,000,000 jobs through its own enqueue",
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop of every process",
    )
    for key, script in (
        ("bulk", "bulk"),
        ("scale", "scale"),
        ("steady", "steady"),
        ("pooler", "pooler"),
    ):
        parser.add_argument(
            f"--{key}-json",
            metavar="PATH",
            help=f"the --json of a benchmarks.{script} run, for its issue-16 targets",
        )
    parser.add_argument("--worker-timeout", type=float, default=900.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.no_synchronous_commit:
        relaxed()
    args.extras = {}
    for key in ("bulk", "scale", "steady", "pooler"):
        path = getattr(args, f"{key}_json")
        if path:
            args.extras[key] = json.loads(Path(path).read_text())
    if args.loop == "uvloop":
        import uvloop

        payload = uvloop.run(amain(args))
    else:
        payload = asyncio.run(amain(args))
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
