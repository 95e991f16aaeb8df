"""The benchmark of record's harness: one ``Bench`` holds a run's databases (one per
system, on one server), its clients and its worker processes, and takes each
measurement of ``python -m benchmarks.compare`` (the steps: enqueue, latency, drain,
health, rss; the ceiling's and the workflows' steps live beside their own code, in
``benchmarks.ceiling`` and ``benchmarks.scenarios.workflows``).

Measurements alternate between the systems (the order rotates each round) so that drift
on the machine hits all of them alike. Every worker runs in a subprocess
(``benchmarks.worker_proc``) with the same event loop, so its CPU time and peak RSS are
its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks import systems
from benchmarks.common import ROOT, create_database, drop_database, fmt, log, median, percentile
from benchmarks.configs import DRAIN_CONFIGS, LATENCY_CONFIGS, LEVELS, OWN_BEST, Plan
from benchmarks.sql import statement as bsql


async def spawn_worker(spec: dict[str, Any], stdin: int, root: Path = ROOT) -> tuple[Any, Any]:
    """A ``benchmarks.worker_proc`` process for ``spec``, and the file its stderr goes to;
    ``root`` is the tree it runs (this one, or an A/B side's)."""
    errors = tempfile.TemporaryFile()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.worker_proc",
        json.dumps(spec),
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=errors,
        cwd=str(root),
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    return proc, errors


def worker_failed(proc: Any, errors: Any, what: str) -> RuntimeError:
    """The error of a worker process that exited badly, with the tail of its stderr."""
    errors.seek(0)
    tail = errors.read().decode(errors="replace")[-3000:]
    return RuntimeError(f"{what}: worker exited with {proc.returncode}:\n{tail}")


async def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One ``benchmarks.worker_proc`` run to its end: its final report."""
    proc, errors = await spawn_worker(spec, asyncio.subprocess.DEVNULL)
    with errors:
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise worker_failed(proc, errors, spec["system"])
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


class Bench:
    """One run's databases, clients and measurements; ``results`` holds the figures."""

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
        # The tree whose worker_proc the workers run (tools.drain_ab: each side's).
        self.root = ROOT
        # Called after each drain with (bench, system, level, result): the ceiling step
        # measures its like-for-like run beside venturi's drain of each round
        # (ceiling.beside_drain), so that the two see the same server.
        self.after_drain: Callable[[Bench, str, int, dict[str, Any]], Awaitable[None]] | None = None

    # --- databases ---------------------------------------------------------------

    async def setup(self) -> None:
        for name in self.names:
            self.dsns[name] = await create_database(self.admin_dsn, f"{self.tag}_{name}")
        for name in self.names:
            client = systems.client(name, self.dsns[name])
            await client.open()
            await client.install()
            self.clients[name] = client
            self.monitors[name] = await asyncpg.connect(self.dsns[name])
        if "venturi" in self.names:
            # venturi's enqueue on psycopg 3 too, on venturi's database.
            self.psycopg_client = systems.adapter("venturi").PsycopgClient(self.dsns["venturi"])
            await self.psycopg_client.open()

    async def teardown(self) -> None:
        extra = [self.psycopg_client] if self.psycopg_client is not None else []
        for conn in [*self.clients.values(), *self.monitors.values(), *extra]:
            with contextlib.suppress(Exception):
                await conn.close()
        for name in self.dsns:
            await drop_database(self.admin_dsn, f"{self.tag}_{name}")

    async def server_facts(self) -> dict[str, Any]:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            return dict(await conn.fetchrow(bsql("server_facts")))
        finally:
            await conn.close()

    async def counters(self, name: str) -> tuple[int, int]:
        """(commits in this database, cluster WAL position): what a drain cost the server."""
        mon = self.monitors[name]
        await mon.execute(bsql("stats_snapshot_clear"))
        row = await mon.fetchrow(bsql("database_counters"))
        return int(row["commits"]), int(row["wal"])

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

    def _spec(self, name: str, cfg: dict[str, Any], mode: str, target: int) -> dict[str, Any]:
        timeout = self.plan.drain_timeout if mode == "drain" else self.worker_timeout
        return {
            "system": name,
            "dsn": self.dsns[name],
            "cfg": cfg,
            "mode": mode,
            "target": target,
            "loop": self.loop,
            "timeout": timeout,
        }

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
        proc, errors = await spawn_worker(
            self._spec(name, cfg, "drain", target), asyncio.subprocess.DEVNULL, self.root
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise worker_failed(proc, errors, f"{name} drain {label}")
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
        proc, errors = await spawn_worker(
            self._spec(name, cfg, "latency", 0), asyncio.subprocess.PIPE, self.root
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
                raise worker_failed(proc, errors, f"{name} latency: no ready")
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
            raise worker_failed(proc, errors, f"{name} latency")
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
                        if self.after_drain is not None and key != "own-best":
                            await self.after_drain(self, name, level, r)
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

    async def measure_rss(self) -> None:
        n = self.plan.rss_jobs
        label, cfg = DRAIN_CONFIGS["venturi"][32][0]
        r = await self.drain("venturi", label, cfg, n, n)
        log(f"  venturi drained {n:,} jobs: peak RSS {r['peak_rss_mb']:.1f} MB")
        self.results["venturi_rss"] = r

    async def checkpoint(self, name: str) -> None:
        """Flush dirty buffers before a timed run, so no run pays for another's writes."""
        if self.plan.checkpoint:
            await self.monitors[name].execute(bsql("checkpoint"))
