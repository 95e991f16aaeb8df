"""The chaos soak: ``python -m tests.chaos.harness --short | --long [--seed N] [--keep]``.

On a throwaway PostgreSQL cluster of its own (never a shared server), several
``venturi worker tests.chaos.alltasks`` processes (``tests.chaos.tasks`` without the
grouped kinds, and in the short soak) drain a stream of jobs that the harness keeps enqueueing while they run:
mixed kinds, priorities, a per-kind cap, handlers that pause, fail, give up, sleep,
ignore shutdown, and one that runs past its lease; grouped jobs
(``tests/chaos/groupload.py``, with four workers of their own besides); and workflows
beside them (``tests/chaos/flowload.py``: flows with steps, a durable sleep, a
signal the harness sends and children gathered; three-node ``venturi.Workflow``s). Meanwhile
the harness follows a schedule that it draws from the seed and logs up front:

- SIGKILL a random worker and start a new one;
- SIGTERM a random worker (graceful drain) and start a new one;
- terminate every other database session (``pg_terminate_backend``);
- restart PostgreSQL once (``pg_ctl restart -m fast`` on its own cluster).

Then it stops enqueueing, lets the workers drain, stops them with SIGTERM and checks the
whole history (``tests/chaos/history.py``): nothing lost or stuck, every re-run explained
by an interruption the journal shows, every settle applied by the claim's owner; and
the workflow checks (``tests/chaos/workflows.py``): no recorded step run again, no child
spawned twice, no signal lost, no workflow stuck. It
prints a summary table; the exit code is 0 only if there is no violation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import asyncpg

import venturi
from venturi import Priority, db, sql, testing

from ..support import sql as test_sql
from . import groupcheck, history, tasks, workflows
from .flowload import FlowLoad
from .groupload import ALL_MODULE, GROUP_MODULE, TASKS_MODULE, GroupLoad
from .grouptasks import GROUP_CAPS as GROUPED
from .tasks import Chaos

ROOT = Path(__file__).resolve().parents[2]
# What the enqueuer retries: venturi's own list, which includes asyncpg's client-side
# errors (TargetServerAttributeNotMatched: no host of the multi-host DSN is writable,
# while writes are refused or during a failover).
TRANSIENT = db.errors.TRANSIENT


@dataclass(frozen=True)
class Config:
    mode: str
    seconds: float  # how long jobs are enqueued and faults injected
    min_jobs: int  # keep enqueueing past `seconds` until this many (long mode)
    workers: int
    concurrency: int
    lease: float  # the workers' default lease: how soon a killed worker's claims return
    poll_max: float
    shutdown_timeout: float
    kills: int
    terms: int
    terminates: int
    restarts: int
    backlog: int  # the producer waits while more jobs than this are unfinished
    batch: int
    drain_seconds: float  # how long the workers get to finish after the last enqueue
    seed: int = 1
    group_workers: int = 4  # workers of the grouped kinds (tests/chaos/grouptasks.py)
    # The ordinary workers run the grouped kinds too (tests/chaos/alltasks.py).
    mixed: bool = False


SHORT = Config(
    mode="short",
    seconds=60,
    min_jobs=0,
    workers=4,
    concurrency=8,
    lease=4.0,
    poll_max=1.0,
    shutdown_timeout=1.0,
    kills=6,
    terms=3,
    terminates=3,
    restarts=1,
    backlog=1500,
    batch=100,
    drain_seconds=60,
)
LONG = replace(
    SHORT,
    mode="long",
    mixed=True,
    seconds=660,
    min_jobs=100_000,
    kills=30,
    terms=15,
    terminates=15,
    backlog=3000,
    batch=200,
    drain_seconds=120,
)

# The mix of kinds the producer draws from (weights).
MIX = {
    "chaos_quick": 700,
    "chaos_sync": 80,
    "chaos_pause": 50,
    "chaos_flaky": 50,
    "chaos_capped": 40,
    "chaos_doomed": 20,
    "chaos_dead": 20,
    "chaos_slow": 20,
    "chaos_stubborn": 25,
    "chaos_overrun": 5,
    "chaos_renewed": 5,
    # Workflows (tests/chaos/flowload.py adds the three-node Workflows and the signals).
    "chaos_flow": 30,
    # Grouped kinds (tests/chaos/groupload.py picks their groups and adds bursts).
    "chaos_group1": 25,
    "chaos_group3": 25,
}
# Library bugs this harness found that are not fixed yet: a signature that appears in the
# violations a bug causes -> the bug. Such violations are reported, and do not fail the
# run; each bug also has a deterministic xfail(strict=True) test. Remove an entry when
# its bug is fixed.
KNOWN_BUGS: dict[str, str] = {
    # Fixed: "paused for a shutdown nobody asked for" (the heartbeat keyed runs by job id
    # and stopped a zombie's successor in the same worker; test_edges_ownership::
    # test_a_zombie_s_lost_claim_does_not_stop_the_same_job_s_new_run_in_that_worker).
    # Fixed: "InternalClientError" (worker crashed on asyncpg.InternalClientError after a
    # terminated backend; tests/test_chaos.py::test_worker_survives_internal_client_error).
}
TASKS = {t.kind: t for t in venturi.tasks.registered().values() if t.kind in tasks.EXPECTED}


@dataclass
class Worker:
    n: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    log: TextIO
    started: float
    fate: str = "running"  # running, killed, terminated, stopped
    signalled: float | None = None
    exit_code: int | None = None
    exited: float | None = None
    module: str = TASKS_MODULE


@dataclass
class Result:
    config: Config
    report: history.Report
    counters: Counter[str] = field(default_factory=Counter)
    summary: str = ""
    out_dir: Path | None = None
    elapsed: float = 0.0
    # A scenario's own figures (the table atop its summary), by name: what its fault did.
    figures: dict[str, Any] = field(default_factory=dict)
    # The workflow checks and figures (tests/chaos/workflows.py).
    flows: workflows.Report = field(default_factory=workflows.Report)
    # The grouped runs' check and figures (tests/chaos/groupcheck.py).
    groups: groupcheck.Report = field(default_factory=groupcheck.Report)

    @property
    def ok(self) -> bool:
        return not self.report.violations


class Harness(FlowLoad, GroupLoad):
    def __init__(self, config: Config, out_dir: Path, echo: Any = print) -> None:
        self.cfg = config
        self.out = out_dir
        self.echo = echo
        self.rng = random.Random(config.seed)
        self.t0 = time.time()
        self.cluster: testing.Cluster | None = None
        self.dsn = ""
        self.conn: Any = None
        self.lock = asyncio.Lock()
        self.workers: list[Worker] = []
        self.faults = history.Faults()
        self.counters: Counter[str] = Counter()
        self.enqueued: dict[int, int] = {}
        self.ambiguous: set[int] = set()
        self.seq = 0
        self.unfinished = 0
        self.producing = True
        self.runs_dir = out_dir / "runs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.log_file = open(out_dir / "schedule.log", "w", buffering=1)
        self.reapers: list[asyncio.Task[None]] = []
        self.t_start = self.t0
        # Since when the server is down on purpose (a restart, a failover), else None.
        self.outage: float | None = None
        self.known: Counter[str] = Counter()
        self._flow_init()
        self._group_init()
        # No grouped kinds without their workers (the single-fault scenarios).
        self.mix = {k: w for k, w in MIX.items() if config.group_workers or k not in GROUPED}

    # --- logging -------------------------------------------------------------------------

    def log(self, message: str) -> None:
        line = f"[{time.time() - self.t0:7.2f}s] {message}"
        self.log_file.write(line + "\n")
        self.echo(line)

    # --- the database ----------------------------------------------------------------

    async def connect(self) -> None:
        for attempt in range(100):
            try:
                self.conn = await asyncpg.connect(self.dsn, timeout=5)
                return
            except TRANSIENT:
                if attempt == 99:
                    raise
                await asyncio.sleep(0.2)  # stays: the interval of a bounded reconnect poll

    async def _fetch(self, name: str, *args: Any) -> list[Any]:
        """A read on the harness connection, reconnecting after a fault."""
        for attempt in range(50):
            async with self.lock:
                try:
                    if self.conn is None or self.conn.is_closed():
                        await self.connect()
                    return list(await self.conn.fetch(sql.statement(name), *args))
                except TRANSIENT:
                    if attempt == 49:
                        raise
                    await self._drop_conn()
            await asyncio.sleep(0.2)  # stays: the interval of a bounded retry
        raise AssertionError("unreachable")

    async def _drop_conn(self) -> None:
        if self.conn is not None:
            self.conn.terminate()
            self.conn = None

    async def counts(self) -> Counter[str]:
        """Jobs by status; ``unfinished`` of it: pending, claimed and waiting."""
        rows = await self._fetch("job_counts", None)
        c: Counter[str] = Counter()
        for r in rows:
            c[r["status"]] += r["jobs"]
        return c

    # --- workers ----------------------------------------------------------------------

    def spawn(self, module: str = TASKS_MODULE) -> Worker:
        n = len(self.workers) + 1
        log_path = self.out / f"worker-{n:03d}.log"
        log = open(log_path, "w")
        env = {**os.environ, "VENTURI_CHAOS_RUNS_DIR": str(self.runs_dir), **self.ledger_env()}
        env.pop("VENTURI_DSN", None)
        cmd = [
            sys.executable,
            "-m",
            "venturi",
            "worker",
            module,
            "--dsn",
            self.dsn,
            "--concurrency",
            str(self.cfg.concurrency),
            "--lease",
            str(self.cfg.lease),
            "--poll-max",
            str(self.cfg.poll_max),
            "--shutdown-timeout",
            str(self.cfg.shutdown_timeout),
            "--log-level",
            "info",
        ]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        w = Worker(n, proc, log_path, log, time.time(), module=module)
        self.workers.append(w)
        self.counters["workers started"] += 1
        return w

    def running(self) -> list[Worker]:
        return [w for w in self.workers if w.fate == "running" and w.proc.poll() is None]

    def _ready(self, w: Worker) -> bool:
        """Started its loop (signal handlers installed): safe to SIGTERM."""
        if time.time() - w.started < 2:
            return False
        with contextlib.suppress(OSError):
            return " started: kinds=" in w.log_path.read_text(errors="replace")
        return False

    async def _reap(self, w: Worker, within: float) -> None:
        try:
            w.exit_code = await asyncio.to_thread(w.proc.wait, within)
        except subprocess.TimeoutExpired:
            self.log(f"worker #{w.n} pid {w.proc.pid} did not exit within {within:.0f}s: SIGKILL")
            w.proc.kill()
            w.exit_code = await asyncio.to_thread(w.proc.wait)
            self.counters["workers hung at SIGTERM"] += 1
        w.exited = time.time()
        w.log.close()

    async def kill_one(self) -> None:
        live = self.running()
        if not live:
            return
        w = self.rng.choice(live)
        w.fate, w.signalled = "killed", time.time()
        w.proc.send_signal(signal.SIGKILL)
        self.faults.kills[w.proc.pid] = w.signalled
        await self._reap(w, 30)
        self.counters["SIGKILL"] += 1
        new = self.spawn(w.module)
        self.log(f"SIGKILL worker #{w.n} pid {w.proc.pid}; started #{new.n} pid {new.proc.pid}")

    async def term_one(self) -> None:
        live = [w for w in self.running() if self._ready(w)]
        if not live:
            self.log("SIGTERM skipped: no worker is up yet")
            return
        w = self.rng.choice(live)
        w.fate, w.signalled = "terminated", time.time()
        w.proc.send_signal(signal.SIGTERM)
        self.faults.terms[w.proc.pid] = w.signalled
        self.counters["SIGTERM"] += 1
        new = self.spawn(w.module)
        self.log(f"SIGTERM worker #{w.n} pid {w.proc.pid}; started #{new.n} pid {new.proc.pid}")

        async def drained() -> None:
            await self._reap(w, self.cfg.shutdown_timeout + 30)
            assert w.exited is not None and w.signalled is not None
            self.log(
                f"worker #{w.n} pid {w.proc.pid} drained in {w.exited - w.signalled:.2f}s, "
                f"exit code {w.exit_code}"
            )

        self.reapers.append(asyncio.create_task(drained()))

    async def terminate_backends(self) -> None:
        start = time.time()
        async with self.lock:
            try:
                if self.conn is None or self.conn.is_closed():
                    await self.connect()
                n = await self.conn.fetchval(test_sql.statement("backends_terminate"))
            except TRANSIENT as exc:
                self.log(f"pg_terminate_backend failed: {exc}")
                return
        self.faults.connection.append((start, time.time() + 1))
        self.counters["pg_terminate_backend"] += 1
        self.counters["sessions terminated"] += int(n)
        self.log(f"pg_terminate_backend: {n} session(s) terminated")

    async def restart_postgres(self) -> None:
        assert self.cluster is not None
        start = time.time()
        self.outage = start
        async with self.lock:
            await self._drop_conn()
            await asyncio.to_thread(self.cluster.restart)
            await self.connect()
        stop = time.time()
        self.faults.connection.append((start, stop + 1))
        self.outage = None
        self.counters["PostgreSQL restarts"] += 1
        self.log(f"PostgreSQL restarted (pg_ctl restart -m fast) in {stop - start:.2f}s")

    # --- the schedule -----------------------------------------------------------------

    def schedule(self) -> list[tuple[float, str]]:
        cfg = self.cfg
        span = (3.0, cfg.seconds - 3.0)
        events = [(self.rng.uniform(*span), "SIGKILL") for _ in range(cfg.kills)]
        events += [(self.rng.uniform(*span), "SIGTERM") for _ in range(cfg.terms)]
        events += [(self.rng.uniform(*span), "pg_terminate_backend") for _ in range(cfg.terminates)]
        events += [
            (cfg.seconds * self.rng.uniform(0.4, 0.6), "PostgreSQL restart")
            for _ in range(cfg.restarts)
        ]
        return sorted(events)

    async def run_schedule(self, plan: list[tuple[float, str]]) -> None:
        actions = {
            "SIGKILL": self.kill_one,
            "SIGTERM": self.term_one,
            "pg_terminate_backend": self.terminate_backends,
            "PostgreSQL restart": self.restart_postgres,
        }
        for at, what in plan:
            delay = self.t_start + at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)  # stays: the faults follow a timetable
            await actions[what]()

    # --- the producer ---------------------------------------------------------------------

    def _job(self) -> Any:
        self.seq += 1
        mix = self.mix
        kind = self.rng.choices(list(mix), weights=list(mix.values()))[0]
        while kind in GROUPED and self.grouped_paced(kind):
            kind = self.rng.choices(list(mix), weights=list(mix.values()))[0]
        ms = {
            "chaos_capped": self.rng.randint(10, 40),
            "chaos_slow": self.rng.randint(200, 1000),
            "chaos_stubborn": self.rng.randint(1000, 3000),
            "chaos_flow": self.rng.randint(100, 1500),  # its durable sleep
        }.get(kind, 0)
        group = self.group_for(kind)
        if group is not None:
            ms = self.group_ms()
        prio = self.rng.choice([Priority.HIGH, Priority.NORMAL, Priority.NORMAL, Priority.LOW])
        after = self.rng.uniform(0.2, 3.0) if self.rng.random() < 0.05 else None
        spec = TASKS[kind].job(Chaos(self.seq, ms=ms), priority=prio, after=after, group=group)
        return self.seq, spec

    async def produce(self, deadline: float) -> None:
        cfg = self.cfg
        while time.time() < deadline or len(self.enqueued) < cfg.min_jobs:
            if self.unfinished > cfg.backlog:
                await asyncio.sleep(0.05)  # stays: polls the backlog going down
                continue
            batch = [self._job() for _ in range(cfg.batch)] + self.grouped_burst()
            ids = await self._enqueue(batch)
            for (seq, _), job_id in zip(batch, ids, strict=True):
                self.enqueued[job_id] = seq
            self.flows_enqueued(batch, ids)
            self.groups_enqueued(batch, ids)
            await self.maybe_enqueue_workflow()
            self.unfinished += len(ids)
            await asyncio.sleep(0.01)  # stays: paces the load, a stream not one burst
        self.producing = False
        self.log(f"enqueueing stopped: {len(self.enqueued)} jobs")

    # A bounded retry of a failed enqueue: how many tries, and the longest pause between.
    enqueue_attempts = 100
    enqueue_pause_cap = 2.0

    async def _enqueue(self, batch: list[tuple[int, Any]]) -> list[int]:
        specs = [spec for _, spec in batch]
        for attempt in range(1, self.enqueue_attempts):
            async with self.lock:
                try:
                    if self.conn is None or self.conn.is_closed():
                        await self.connect()
                    return await venturi.enqueue_many(self.conn, specs)
                except TRANSIENT as exc:
                    # The commit may or may not have happened: send the batch again and
                    # let the history check accept a second copy of these seqs.
                    self.ambiguous.update(seq for seq, _ in batch)
                    self.counters["ambiguous enqueue batches"] += 1
                    self._enqueue_failed(exc)
                    await self._drop_conn()
            # stays: backoff of a bounded retry
            await asyncio.sleep(min(0.1 * attempt, self.enqueue_pause_cap))
        raise RuntimeError("could not enqueue")

    def _enqueue_failed(self, exc: BaseException) -> None:
        self.log(f"enqueue failed ({exc}); sending the batch again")

    def _down_at_start(self, w: Worker) -> bool:
        """Did ``w`` exit 2 because the server was down when it started? A worker checks
        its DSN at start and exits 2 with one line if it cannot connect (documented,
        docs/operations.md): a replacement started just before a restart or a failover
        may meet it on a busy machine. Not a crash."""
        if w.proc.returncode != 2 or (self.outage is None and not self.faults.connection):
            return False
        with contextlib.suppress(OSError):
            if "cannot connect" not in w.log_path.read_text(errors="replace"):
                return False
        now = time.time()
        down = self.outage is not None or any(
            a <= now and b >= w.started for a, b in self.faults.connection
        )
        return down and now - w.started < 60

    def _crashed(self) -> None:
        """A worker that exited without being signalled crashed: a bug. Replace it."""
        for w in self.workers:
            if w.fate == "running" and w.proc.poll() is not None:
                if self._down_at_start(w):
                    w.fate, w.exit_code, w.exited = "down at start", 2, time.time()
                    w.log.close()
                    self.counters["workers that found the server down at start"] += 1
                    new = self.spawn(w.module)
                    self.log(
                        f"worker #{w.n} pid {w.proc.pid} exited 2: the server was down when "
                        f"it started; started #{new.n} pid {new.proc.pid}"
                    )
                    continue
                w.fate, w.exit_code, w.exited = "crashed", w.proc.returncode, time.time()
                w.log.close()
                self.faults.crashes[w.proc.pid] = w.exited
                self.counters["worker crashes"] += 1
                new = self.spawn(w.module)
                self.log(
                    f"worker #{w.n} pid {w.proc.pid} CRASHED (exit code {w.exit_code}); "
                    f"started #{new.n} pid {new.proc.pid}"
                )

    async def monitor(self) -> None:
        tick = 0
        while True:
            await asyncio.sleep(1)  # stays: the monitor's tick (crashes, progress)
            self._crashed()
            tick += 1
            if tick % 5:
                continue
            try:
                c = await self.counts()
            except TRANSIENT:
                continue
            self.unfinished = c["pending"] + c["claimed"] + c["waiting"]
            self.log(
                f"jobs {len(self.enqueued)}: completed {c['completed']} dead {c['dead']} "
                f"pending {c['pending']} claimed {c['claimed']} waiting {c['waiting']}; "
                f"workers {len(self.running())}"
            )

    async def _log_unfinished(self) -> None:
        from venturi import admin

        for status in ("claimed", "pending", "waiting"):
            async with self.lock:
                if self.conn is None or self.conn.is_closed():
                    await self.connect()
                rows = await admin.list_jobs(self.conn, status=status, limit=5)
            for r in rows:
                self.log(f"  still {status}: {r}")
        # A grouped job left pending: its group's state as the claim reads it.
        for r in await self._test_fetch("chaos_groups_unserved"):
            self.log(f"  unserved grouped job: {dict(r)}")

    async def _unfinished(self) -> int:
        c = await self.counts()
        self.unfinished = c["pending"] + c["claimed"] + c["waiting"]
        return self.unfinished

    # --- the run ----------------------------------------------------------------------

    async def run(self) -> Result:
        self.cluster = await asyncio.to_thread(testing.start_cluster)
        if self.cluster is None:
            raise RuntimeError("no PostgreSQL binaries to start a throwaway cluster")
        try:
            return await self._run()
        finally:
            for w in self.workers:
                if w.proc.poll() is None:
                    w.proc.kill()
                    w.proc.wait()
                if not w.log.closed:
                    w.log.close()
            if self.conn is not None:
                await self.conn.close()
            await asyncio.to_thread(self.cluster.destroy)
            self.log_file.close()

    async def _run(self) -> Result:
        cfg = self.cfg
        assert self.cluster is not None
        self.dsn = self.cluster.dsn
        await self.connect()
        await db.schema.apply_schema(self.conn, schema=sql.DEFAULT_SCHEMA)
        await self.create_side_table()
        self.ledger_dsn = self.dsn
        await self.create_ledger()
        self.log(
            f"chaos soak ({cfg.mode}): seed {cfg.seed}, {cfg.workers} workers x "
            f"concurrency {cfg.concurrency}, lease {cfg.lease}s, shutdown_timeout "
            f"{cfg.shutdown_timeout}s, cluster {self.dsn}, output {self.out}"
        )
        plan = self.schedule()
        self.log("schedule (seconds after the start):")
        for at, what in plan:
            self.log(f"  {at:7.2f}  {what}")
        # In the long runs with the grouped kinds, every worker runs them too
        # (tests/chaos/alltasks.py); the short soak that CI runs keeps them on their own
        # workers unless --mixed (docs/chaos.md, "Groups in the soak").
        mixed = cfg.group_workers and cfg.mixed
        for _ in range(cfg.workers):
            self.spawn(ALL_MODULE if mixed else TASKS_MODULE)
        for _ in range(cfg.group_workers):
            self.spawn(GROUP_MODULE)
        self.t_start = time.time()
        monitor = asyncio.create_task(self.monitor())
        faults = asyncio.create_task(self.run_schedule(plan))
        signaller = asyncio.create_task(self.send_signals())
        watcher = asyncio.create_task(self.watch_waiting())
        lowerer = asyncio.create_task(self.lower_caps(cfg.seconds))
        try:
            await self.produce(self.t_start + cfg.seconds)
            await faults
            await signaller
            drain_start = time.time()
            while time.time() - drain_start < cfg.drain_seconds:
                if await self._unfinished() == 0:
                    break
                await asyncio.sleep(0.5)  # stays: the interval of the drain poll
                if int(time.time() - drain_start) % 10 == 0:
                    await self._log_unfinished()
            self.log(f"drained in {time.time() - drain_start:.1f}s: {self.unfinished} unfinished")
        finally:
            for task in (monitor, faults, signaller, watcher, lowerer):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # Stop the rest gracefully: every one must exit 0 within its shutdown timeout.
        last = self.running()
        for w in last:
            w.fate, w.signalled = "stopped", time.time()
            w.proc.send_signal(signal.SIGTERM)
            self.faults.terms[w.proc.pid] = w.signalled
        await asyncio.gather(*(self._reap(w, cfg.shutdown_timeout + 30) for w in last))
        await asyncio.gather(*self.reapers)
        self.log(f"stopped the last {len(last)} workers")
        elapsed = time.time() - self.t0
        report = await self.check()
        summary = self.summarize(report, elapsed)
        return Result(
            cfg,
            report,
            self.counters,
            summary,
            self.out,
            elapsed,
            flows=self.flow_report,
            groups=self.group_report,
        )

    # --- the check --------------------------------------------------------------------

    async def check(self) -> history.Report:
        jobs: list[history.Job] = []
        after = 0
        while True:
            rows = await self._fetch("maintenance/history_jobs", after, 10_000)
            if not rows:
                break
            after = rows[-1]["id"]
            jobs += [
                history.Job(
                    id=r["id"],
                    kind=r["kind"],
                    status=r["status"],
                    carry=history.decode(r["carry"]),
                    attempt=r["attempt"],
                    failures=r["failures"],
                    max_failures=r["max_failures"],
                    claimed_by=r["claimed_by"],
                    claimed_at=r["claimed_at"] and r["claimed_at"].timestamp(),
                    finished_at=r["finished_at"] and r["finished_at"].timestamp(),
                    result=history.decode(r["result"]),
                    last_error=r["last_error"],
                    grp=r["grp"],
                )
                for r in rows
            ]
        events: list[history.Event] = []
        after = 0
        while True:
            rows = await self._fetch("maintenance/history_journal", after, 20_000)
            if not rows:
                break
            after = rows[-1]["id"]
            events += [
                history.Event(
                    r["job_id"],
                    r["at"].timestamp(),
                    r["event"],
                    r["attempt"],
                    r["worker"],
                    r["detail"],
                )
                for r in rows
            ]
        mismatches = await self._cross_check_journal(jobs, events)
        lines: list[str] = []
        for f in sorted(self.runs_dir.glob("runs-*.txt")):
            lines += f.read_text().splitlines()
        runs = history.parse_runs(lines)
        # Children are enqueued by their parent's ctx.spawn, not by the harness.
        spawned = {j.id for j in jobs if j.kind == "chaos_child"}
        report = history.check(
            jobs,
            events,
            runs,
            self.faults,
            enqueued=self.enqueued,
            ambiguous_seqs=self.ambiguous,
            expected=tasks.EXPECTED,
            leases={k: t.lease or self.cfg.lease for k, t in TASKS.items()},
            caps={k: t.cap for k, t in TASKS.items() if t.cap},
            renewing=frozenset(k for k, t in TASKS.items() if t.renew_lease),
            spawned=spawned,
        )
        await self.check_workflows(jobs, lines)
        for v in self.flow_report.violations:
            report.violate(v)
        await self.check_groups(jobs, events, lines)
        for v in self.group_report.violations:
            report.violate(v)
        for m in mismatches:
            report.violate(m)
        self._check_workers(report)
        for reason, examples in report.examples.items():
            self.log(f"examples of {reason}:")
            for e in examples:
                self.log(f"  {e}")
        return report

    async def _cross_check_journal(
        self, jobs: list[history.Job], events: list[history.Event]
    ) -> list[str]:
        """The check merges the journal itself; make sure it agrees with get_journal."""
        journaled = sorted({e.job for e in events})
        sample = self.rng.sample(journaled, min(100, len(journaled)))
        sample += [j.id for j in self.rng.sample(jobs, min(20, len(jobs)))]
        by_id = {j.id: j for j in jobs}
        mismatches: list[str] = []
        mine: dict[int, list[history.Event]] = {}
        for e in events:
            mine.setdefault(e.job, []).append(e)
        for job_id in sample:
            async with self.lock:
                if self.conn is None or self.conn.is_closed():
                    await self.connect()
                theirs = await venturi.get_journal(self.conn, job_id)
            try:
                claims = history.claims_of(by_id[job_id], sorted(mine.get(job_id, []), key=_at))
            except ValueError:
                continue  # the main check reports a journal it cannot read
            want = sorted(
                [(c.attempt, "claimed", c.worker) for c in claims.values()]
                + [(c.attempt, c.end.event, c.end.worker) for c in claims.values() if c.end]
            )
            got = sorted(
                (e.attempt, e.event, e.worker)
                for e in theirs
                if e.event not in ("enqueued", "woken")
                and not (e.event == "dead" and e.detail and "backstop" in e.detail)
            )
            if want != got:
                mismatches.append(f"job {job_id}: get_journal {got} != the check's {want}")
        return mismatches

    def _check_workers(self, report: history.Report) -> None:
        self._crashed()
        tracebacks = 0
        for w in self.workers:
            text = w.log_path.read_text(errors="replace")
            last_error = _last_exception(text)
            if w.fate == "crashed":
                # A one-line exit (the CLI's exit 2) has no traceback: say its last line.
                lines = [line for line in text.splitlines() if line.strip()]
                said = last_error or (lines[-1][:300] if lines else "(an empty log)")
                report.violate(
                    f"worker #{w.n} pid {w.proc.pid} crashed (exit code {w.exit_code}): {said}"
                )
            for line in groupcheck.stranded(text):
                self.counters["groups found stranded (worker logs)"] += 1
                report.violate(f"worker #{w.n}: {line}")
            refused = text.count("no longer holds its claim")
            self.counters["settles refused (worker logs)"] += refused
            carrying, pool_noise = _tracebacks(text)
            self.counters["asyncpg pool reconnect tracebacks"] += pool_noise
            if carrying:
                tracebacks += 1
                record = carrying[-1]
                report.violate(
                    f"worker #{w.n}: a traceback in its log: {_last_exception(record)} "
                    f"(logged by: {record.splitlines()[0][:200]})"
                )
            if w.fate in ("terminated", "stopped") and w.exit_code != 0:
                report.violate(
                    f"worker #{w.n} exited {w.exit_code} after SIGTERM, not 0: {last_error}"
                )
        self.counters["worker logs with a traceback"] = tracebacks
        # Violations a known, reported library bug explains do not fail the run.
        for v in list(report.violations):
            for signature, bug in KNOWN_BUGS.items():
                if signature in v:
                    report.violations.remove(v)
                    self.known[bug] += 1
                    break

    def summarize(self, rep: history.Report, elapsed: float) -> str:
        cfg, c = self.cfg, self.counters
        rows: list[tuple[str, Any]] = [
            ("mode / seed", f"{cfg.mode} / {cfg.seed}"),
            ("wall time", f"{elapsed:.0f} s ({cfg.seconds:.0f} s of load and faults)"),
            ("jobs enqueued", len(self.enqueued)),
            ("jobs completed", rep.statuses["completed"]),
            ("jobs dead (as their handler dictates)", rep.statuses["dead"]),
            ("jobs lost", rep.lost),
            ("jobs stuck (pending / claimed)", rep.stuck),
            ("re-sent ambiguous enqueues (extra copies)", rep.phantoms),
            ("worker processes started", c["workers started"]),
            ("SIGKILL", c["SIGKILL"]),
            ("SIGTERM (graceful drain)", c["SIGTERM"]),
            (
                "pg_terminate_backend (sessions ended)",
                f"{c['pg_terminate_backend']} ({c['sessions terminated']})",
            ),
            ("PostgreSQL restarts", c["PostgreSQL restarts"]),
            ("handler runs", rep.runs),
            ("claims", rep.claims),
            ("jobs run more than once (by design or interrupted)", rep.multi_run_jobs),
        ]
        for reason in history.REASONS:
            rows.append((f"re-runs: {reason}", rep.reruns[reason]))
        rows += [
            (
                "claims lost before their handler started",
                f"{sum(rep.unrun_claims.values())}"
                + (
                    f" ({', '.join(f'{k}: {v}' for k, v in sorted(rep.unrun_claims.items()))})"
                    if rep.unrun_claims
                    else ""
                ),
            ),
            (
                "late settles refused (history / worker logs)",
                f"{rep.late_settles} / {c['settles refused (worker logs)']}",
            ),
            ("overrun jobs (first run outlived its 1 s lease)", rep.overrun_jobs),
            ("... of which ran twice", rep.overrun_twice),
            ("long runs with renew_lease (3 s on a 1.5 s lease)", rep.renewed_jobs),
            ("... of which ran twice", rep.renewed_twice),
            ("worker crashes", c["worker crashes"]),
            (
                "workers that found the server down at start (exit 2, replaced)",
                c["workers that found the server down at start"],
            ),
            *self.flow_rows(),
            *self.group_rows(),
            ("violations", len(rep.violations)),
        ]
        for bug, n in self.known.items():
            rows.append((f"known bug hit ({n} violation(s))", bug))
        width = max(len(k) for k, _ in rows)
        out = [f"| {'what':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
        out += [f"| {k:<{width}} | {v} |" for k, v in rows]
        if rep.violations:
            out.append("")
            out.append(f"VIOLATIONS ({len(rep.violations)}):")
            out += [f"  - {v}" for v in rep.violations[:40]]
        return "\n".join(out)


# A worker log's record starts with its timestamp; the lines after it up to the next
# record (a traceback, chained ones included) belong to it.
RECORD_START = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} ")
# asyncpg's pool logs a traceback with its own warning when it cannot restore its
# connection floor (the server is restarting, the network cut): noise, counted apart,
# however many tracebacks the record holds (an exception with a cause prints two).
POOL_NOISE = "WARNING asyncpg.pool: Failed to restore"


def _records(text: str) -> list[str]:
    """A log's records, each with the lines that follow it (lines before the first
    record are one record of their own)."""
    records: list[list[str]] = []
    for line in text.splitlines():
        if RECORD_START.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
    return ["\n".join(r) for r in records]


def _tracebacks(text: str) -> tuple[list[str], int]:
    """The records of a log that carry a traceback, but asyncpg's pool reconnect
    warnings; and how many of those there were."""
    carrying, noise = [], 0
    for record in _records(text):
        if POOL_NOISE in record.split("\n", 1)[0]:
            noise += 1
        elif "Traceback" in record:
            carrying.append(record)
    return carrying, noise


def _last_exception(text: str) -> str:
    """The last ``package.SomeError: message`` line of a log (what a traceback ended with),
    skipping the records of asyncpg's pool reconnect warnings."""
    found = ""
    for record in _records(text):
        lines = record.splitlines()
        if POOL_NOISE in lines[0]:
            continue
        for line in lines:
            if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line):
                found = line
    return found[:300]


def _at(e: history.Event) -> float:
    return e.at


async def soak(config: Config, out_dir: Path | None = None, echo: Any = print) -> Result:
    """Run one soak; ``out_dir`` keeps the schedule, the worker logs and the run records."""
    own = out_dir is None
    out = out_dir or Path(tempfile.mkdtemp(prefix=f"venturi-chaos-{config.mode}-"))
    harness = Harness(config, out, echo)
    result = await harness.run()
    if own and result.ok:
        shutil.rmtree(out, ignore_errors=True)
        result.out_dir = None
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos.harness", description=__doc__)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--short", action="store_true", help="about a minute (CI)")
    mode.add_argument("--long", action="store_true", help="11 min, >= 100,000 jobs (release)")
    p.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random)")
    p.add_argument("--seconds", type=float, default=None, help="override the load duration")
    p.add_argument(
        "--mixed",
        action="store_true",
        help="the ordinary workers run the grouped kinds too (the long mode's default)",
    )
    p.add_argument("--keep", metavar="DIR", default=None, help="keep logs and records in DIR")
    args = p.parse_args(argv)
    cfg = LONG if args.long else SHORT
    cfg = replace(cfg, seed=args.seed if args.seed is not None else random.randrange(10**6))
    if args.seconds is not None:
        cfg = replace(cfg, seconds=args.seconds)
    if args.mixed:
        cfg = replace(cfg, mixed=True)
    out = Path(args.keep) if args.keep else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    # SIGTERM unwinds like Ctrl-C, so the workers and the cluster are cleaned up.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    result = asyncio.run(soak(cfg, out))
    print()
    print(result.summary)
    if result.out_dir is not None:
        print(f"\nlogs, schedule and run records: {result.out_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
