"""The chaos soak's worker processes and the faults it injects (a mixin of
``harness.Harness``): ``Worker``, one ``venturi worker`` process and its fate; starting
one (``spawn``), reaping one, and replacing one that crashed or found the server down at
its start; the faults: SIGKILL or SIGTERM a random worker and start a new one, terminate
every other database session, restart PostgreSQL; and their timetable, drawn from the
seed (``schedule``) and followed while the load runs (``run_schedule``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from venturi import db, testing

from ..support import sql as test_sql
from . import records
from .config import Config
from .groupload import TASKS_MODULE

# The workers' working directory: the repository's root, where ``tests.chaos`` imports.
ROOT = Path(__file__).resolve().parents[2]
TRANSIENT = db.errors.TRANSIENT


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


class Fleet:
    """The harness's worker processes and faults; see the module's docstring."""

    # Provided by harness.Harness.
    cfg: Config
    out: Path
    rng: random.Random
    lock: asyncio.Lock
    conn: Any
    cluster: testing.Cluster | None
    dsn: str
    workers: list[Worker]
    faults: records.Faults
    counters: Counter[str]
    runs_dir: Path
    reapers: list[asyncio.Task[None]]
    t_start: float
    outage: float | None

    if TYPE_CHECKING:  # provided by harness.Harness too

        def log(self, message: str) -> None: ...

        async def connect(self) -> None: ...

        async def _drop_conn(self) -> None: ...

        def ledger_env(self) -> dict[str, str]: ...

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

    # --- the faults -------------------------------------------------------------------

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

    def fault_actions(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """What each entry of a schedule does (a scenario adds its own faults)."""
        return {
            "SIGKILL": self.kill_one,
            "SIGTERM": self.term_one,
            "pg_terminate_backend": self.terminate_backends,
            "PostgreSQL restart": self.restart_postgres,
        }

    async def run_schedule(self, plan: list[tuple[float, str]]) -> None:
        actions = self.fault_actions()
        for at, what in plan:
            delay = self.t_start + at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)  # stays: the faults follow a timetable
            await actions[what]()
