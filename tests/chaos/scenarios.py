"""Network and server fault scenarios: ``python -m tests.chaos.scenarios NAME [--seconds S]``.

Each runs the chaos soak's machinery (``tests/chaos/harness.py``: real ``venturi worker
tests.chaos.tasks`` processes, the harness's enqueuer, the whole-history check of
``tests/chaos/history.py``) on a throwaway cluster of its own, with one kind of fault
instead of process kills:

- ``failover``: a primary and a synchronous streaming standby (``tests/chaos/standby.py``);
  workers and the enqueuer use the multi-host DSN; mid-run the primary is stopped hard
  (``pg_ctl stop -m immediate``) and the standby promoted.
- ``blackhole``: every worker reaches PostgreSQL through a proxy of its own
  (``tests/chaos/proxy.py``), its LISTEN connection too. A third of the way in, worker 1's
  open connections stop forwarding (both sockets stay open) until two thirds in, when the
  partition heals: a partition longer than the lease, so its claims are recovered
  elsewhere and its late settles must be refused. Halfway in, worker 2's open connections
  are black-holed for good (a flow a firewall forgot; new connections pass): it must
  notice, reconnect and carry on.
- ``refused-writes``: ``default_transaction_read_only`` switched on with ``ALTER SYSTEM`` and
  ``pg_reload_conf()`` for a few seconds, then off: workers must back off and keep the
  outcomes they could not write, and write them once writes return.
- ``slow``: every worker's client-to-server bytes delayed 50-500 ms (drawn per chunk)
  through its proxy for most of the run: leases sized for the default must hold and the
  loop must not spin.
- ``all``: the long soak (11 minutes, at least 200,000 jobs by default): the chaos
  soak's long run of SIGKILLs, SIGTERMs, backend kills and a restart, on a primary and
  a synchronous standby, every worker behind two proxies of its own (one per host of the
  multi-host DSN), with one of each fault above: a black-hole healed after a lease, one
  for good, writes refused, a slow minute, and the failover last.

It prints the soak's table plus the scenario's figures; the exit code is 0 only if the
history check finds no violation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import datetime as dt
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import asyncpg

from tests.support import sql as pgsql
from venturi import db, testing

from . import groupload, harness, history, standby
from .proxy import Proxy

NAMES = ("failover", "blackhole", "refused-writes", "slow", "all")
# Proxies for replacements nobody scheduled (a crash, a worker that found the server down
# at start): the long soak started 52 workers once, and the 52nd had none (IndexError).
SPARE_PROXIES = 12

# Process faults off: one kind of fault at a time. A shorter drain than the soak's: a
# scenario that cannot drain in 30 s has already shown what it breaks.
BASE = replace(
    harness.SHORT,
    mode="scenario",
    seconds=45,
    kills=0,
    terms=0,
    terminates=0,
    restarts=0,
    drain_seconds=30,
    # No grouped kinds in a single fault's scenario (12 s in CI): their four workers
    # starting on a busy host delayed the LISTEN connections the failover must cut.
    group_workers=0,
)
# The long soak with every fault: the chaos soak's long run (SIGKILLs, SIGTERMs, backend
# kills, a restart) plus each scenario's fault, on a primary and a standby, every worker
# behind proxies of its own.
ALL = replace(
    harness.LONG,
    mode="scenario",
    seconds=660,
    min_jobs=200_000,
    drain_seconds=120,
)
READ_ONLY_SECONDS = 5.0
SLOW_DELAY = (0.05, 0.5)
# How long the harness waits for a SIGTERMed worker past its shutdown_timeout before it
# SIGKILLs it (and counts it as hung).
HUNG_AFTER = 10.0
# An outcome its handler returned less than this before its worker was cut off (a
# SIGKILL, a black-hole) or the database slowed is written by the loop's next
# iteration, which the fault met:
# its re-run is by design, as for the refused windows, which open as early. (The soak
# with workflows, a loop iteration slower under their statements, saw 0.15 s.)
CUT_OFF_MARGIN = 1.0


class Twin:
    """A worker's two proxies, one to each host of the primary/standby pair, behind one
    multi-host DSN: faults apply to both."""

    def __init__(self, proxies: list[Proxy]) -> None:
        self.proxies = proxies

    @classmethod
    async def start(cls, ports: list[int], seed: int) -> Twin:
        return cls([await Proxy.start("127.0.0.1", p, seed * 10 + i) for i, p in enumerate(ports)])

    @property
    def links(self) -> list[Any]:
        return [x for p in self.proxies for x in p.links]

    def open_links(self) -> list[Any]:
        return [x for p in self.proxies for x in p.open_links()]

    def dsn(self, own: str) -> str:
        scheme, rest = own.split("://", 1)
        netloc, _, tail = rest.partition("/")
        user, _, _hosts = netloc.rpartition("@")
        hosts = ",".join(p.address for p in self.proxies)
        return f"{scheme}://{user + '@' if user else ''}{hosts}/{tail}"

    def blackhole(self, links: Any = None, new: bool = True) -> None:
        for p in self.proxies:
            p.blackhole(links, new)

    def restore(self, links: Any = None, new: bool = True) -> None:
        for p in self.proxies:
            p.restore(links, new)

    def delay(self, seconds: Any) -> None:
        for p in self.proxies:
            p.delay(seconds)

    async def close(self) -> None:
        for p in self.proxies:
            await p.close()


@dataclass
class Hole:
    """A black-holed set of links of one worker's proxy."""

    worker: int
    proxy: Any  # a Proxy, or a Twin
    at: float
    links: list[Any]
    healed: float | None = None


class Scenario(harness.Harness):
    def __init__(self, name: str, config: harness.Config, out: Path, echo: Any = print) -> None:
        super().__init__(config, out, echo)
        self.name = name
        self.pair: standby.Pair | None = None
        self.proxies: list[Any] = []  # per worker: a Proxy, or a Twin in "all"
        # Each fault's window (start, end), by fault.
        self.windows: dict[str, tuple[float, float]] = {}
        self.holes: list[Hole] = []
        self.enqueue_errors: Counter[str] = Counter()
        self.control: Any = None  # a session that ignores the read-only switch
        self.fault_at: float | None = None
        self.fault_end: float | None = None
        self.rate_before: dict[int, float] = {}
        self.rate_during: dict[int, float] = {}
        self.dropped: list[str] = []
        self.expired_in_outage = 0
        self.lost_to_partition = 0
        self.short_when_slow = 0
        self.early_releases = 0
        self.settle_lag = "-"
        self.figure_values: dict[str, Any] = {}

    # --- setup -------------------------------------------------------------------------

    async def run(self) -> harness.Result:
        try:
            if self.name in ("failover", "all"):
                self.pair = await asyncio.to_thread(standby.start_pair)
                # The soak takes its DSN from its cluster: hand it one naming both hosts.
                self.cluster = copy.copy(self.pair.primary)
                self.cluster.dsn = self.pair.dsn
            else:
                self.cluster = await asyncio.to_thread(testing.start_cluster)
                if self.cluster is None:
                    raise RuntimeError("no PostgreSQL binaries to start a throwaway cluster")
                self.dsn = self.cluster.dsn
            if self.name in ("blackhole", "slow"):
                # One proxy per worker process (none is replaced in these scenarios, but
                # leave room): a worker's connections are exactly its proxy's links.
                for n in range(self.cfg.workers + self.cfg.group_workers + 2):
                    self.proxies.append(await Proxy.start("127.0.0.1", self.cluster.port, n))
            if self.name == "all":
                assert self.pair is not None
                ports = [self.pair.primary.port, self.pair.standby.port]
                # Every worker ever started (the first ones and each replacement) gets
                # its own pair of proxies; beyond the scheduled kills and stops, a worker
                # that crashed or found the server down at start is replaced too.
                cfg = self.cfg
                for n in range(
                    cfg.workers + cfg.group_workers + cfg.kills + cfg.terms + SPARE_PROXIES
                ):
                    self.proxies.append(await Twin.start(ports, n))
            result = await self._run()
            result.figures = self.figure_values
            return result
        finally:
            for w in self.workers:
                if w.proc.poll() is None:
                    w.proc.kill()
                    w.proc.wait()
                if not w.log.closed:
                    w.log.close()
            for p in self.proxies:
                await p.close()
            for c in (self.conn, self.control):
                if c is not None:
                    c.terminate()
            if self.pair is not None:
                await asyncio.to_thread(self.pair.destroy)
            elif self.cluster is not None:
                await asyncio.to_thread(self.cluster.destroy)
            self.log_file.close()

    def spawn(self, module: str = groupload.TASKS_MODULE) -> harness.Worker:
        # The harness's own connection stays direct; the worker gets its proxy.
        own = self.dsn
        if self.proxies:
            self.dsn = self.proxies[len(self.workers)].dsn(own)
        try:
            return super().spawn(module)
        finally:
            self.dsn = own

    async def _reap(self, w: harness.Worker, within: float) -> None:
        await super()._reap(w, min(within, self.cfg.shutdown_timeout + HUNG_AFTER))

    # Faults here last seconds (writes refused, a failover): retry longer, more often.
    enqueue_attempts = 200
    enqueue_pause_cap = 1.0

    def _enqueue_failed(self, exc: BaseException) -> None:
        # Which error an enqueuer must be ready to retry: counted by type.
        self.enqueue_errors[type(exc).__name__] += 1
        if self.enqueue_errors[type(exc).__name__] <= 3:
            self.log(f"enqueue failed ({type(exc).__name__}: {exc}); sending again")

    # --- the faults --------------------------------------------------------------------

    def schedule(self) -> list[tuple[float, str]]:
        s = self.cfg.seconds
        if self.name == "failover":
            return [(s * 0.4, "failover")]
        if self.name == "blackhole":
            return [
                (s * 0.3, "blackhole worker 1"),
                (s * 0.5, "blackhole worker 2 for good"),
                (s * 0.7, "heal worker 1"),
            ]
        if self.name == "refused-writes":
            return [(s * 0.4, "writes refused")]
        if self.name == "all":
            # The soak's process faults (its restart at 40-60 %) around one of each
            # network and server fault; the failover last, the restart being the
            # primary's.
            return sorted(
                [
                    *super().schedule(),
                    (s * 0.10, "blackhole a worker"),
                    (s * 0.16, "heal the black-holed"),
                    (s * 0.25, "blackhole a worker for good"),
                    (s * 0.32, "writes refused"),
                    (s * 0.66, "slow"),
                    (s * 0.76, "fast again"),
                    (s * 0.85, "failover"),
                ]
            )
        return [(3.0, "slow"), (s - 3.0, "fast again")]

    async def run_schedule(self, plan: list[tuple[float, str]]) -> None:
        actions = {
            "failover": self.failover,
            "blackhole worker 1": lambda: self.blackhole(1),
            "blackhole worker 2 for good": lambda: self.blackhole(2),
            "heal worker 1": lambda: self.heal(1),
            "writes refused": self.refuse_writes,
            "slow": self.slow,
            "fast again": self.fast,
            "blackhole a worker": lambda: self.blackhole(self._a_running_worker()),
            "heal the black-holed": self.heal_all,
            "blackhole a worker for good": lambda: self.blackhole(self._a_running_worker()),
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

    async def restart_postgres(self) -> None:
        start = time.time()
        await super().restart_postgres()
        self.windows["restart"] = (start, time.time())

    def _a_running_worker(self) -> int:
        """A running worker not black-holed already (the first such)."""
        held = {h.worker for h in self.holes if h.healed is None}
        return next(w.n for w in self.running() if w.n not in held)

    async def heal_all(self) -> None:
        for n in sorted({h.worker for h in self.holes if h.healed is None}):
            await self.heal(n)

    async def failover(self) -> None:
        assert self.pair is not None
        start = time.time()
        self.fault_at = self.outage = start
        took = await asyncio.to_thread(self.pair.fail_over)
        self.fault_end = time.time()
        self.outage = None
        self.windows["failover"] = (start, self.fault_end)
        self.faults.connection.append((start, self.fault_end + 1))
        self.counters["failovers"] += 1
        self.log(
            f"failover: primary :{self.pair.primary.port} stopped (-m immediate), standby "
            f":{self.pair.standby.port} promoted; writable after {took:.2f}s"
        )

    async def blackhole(self, n: int) -> None:
        proxy = self.proxies[n - 1]
        links = proxy.open_links()
        proxy.blackhole(links, new=False)
        at = time.time()
        self.holes.append(Hole(n, proxy, at, links))
        # Recorded as an open-ended connection fault of this worker's claims; closed when
        # the partition heals or at the end.
        self.faults.connection.append((at, float("inf")))
        self.counters["black-holes"] += 1
        self.log(f"black-holed worker #{n}: its {len(links)} open connection(s)")

    async def heal(self, n: int) -> None:
        for hole in self.holes:
            if hole.worker == n and hole.healed is None:
                hole.proxy.restore(hole.links, new=False)
                hole.healed = time.time()
                self.log(f"healed worker #{n}'s partition after {hole.healed - hole.at:.1f}s")

    async def _control(self) -> Any:
        if self.control is None or self.control.is_closed():
            # A session-level setting outranks the server's: this session can always
            # switch writes back on.
            self.control = await asyncpg.connect(
                self.dsn, timeout=5, server_settings={"default_transaction_read_only": "off"}
            )
        return self.control

    async def refuse_writes(self) -> None:
        conn = await self._control()
        await conn.execute(pgsql.statement("settings_read_only_on"))
        await conn.fetchval(pgsql.statement("config_reload"))
        self.fault_at = time.time()
        self.counters["write refusals"] += 1
        self.log(f"writes refused (default_transaction_read_only on) for {READ_ONLY_SECONDS}s")
        await asyncio.sleep(READ_ONLY_SECONDS)  # stays: how long the fault lasts is its point
        await conn.execute(pgsql.statement("settings_read_only_reset"))
        await conn.fetchval(pgsql.statement("config_reload"))
        self.fault_end = time.time()
        self.windows["writes refused"] = (self.fault_at, self.fault_end)
        self.faults.connection.append((self.fault_at, self.fault_end + 1))
        self.log("writes allowed again")

    def _rates(self) -> dict[int, float]:
        """Chunks each worker sent so far, for its statement rate."""
        return {
            w.n: float(sum(x.stats.chunks_up for x in self.proxies[w.n - 1].links))
            for w in self.workers
        }

    async def slow(self) -> None:
        self.fault_at = time.time()
        self.rate_before = self._rates()
        for p in self.proxies:
            p.delay(SLOW_DELAY)
        self.counters["slow periods"] += 1
        self.log(f"every worker's statements delayed {SLOW_DELAY[0]}-{SLOW_DELAY[1]}s")

    async def fast(self) -> None:
        self.fault_end = time.time()
        assert self.fault_at is not None
        self.windows["slow"] = (self.fault_at, self.fault_end)
        self.rate_during = self._rates()
        for p in self.proxies:
            p.restore()
        self.log("delays lifted")

    # --- the extra check ---------------------------------------------------------------

    async def check(self) -> history.Report:
        report = await super().check()
        events: list[history.Event] = []
        after = 0
        while True:
            rows = await self._fetch("maintenance/history_journal", after, 20_000)
            if not rows:
                break
            after = rows[-1]["id"]
            events += [
                history.Event(
                    r["job_id"], r["at"].timestamp(), r["event"], r["attempt"], r["worker"],
                    r["detail"],
                )
                for r in rows
            ]  # fmt: skip
        lines: list[str] = []
        for f in sorted(self.runs_dir.glob("runs-*.txt")):
            lines += f.read_text().splitlines()
        # No outcome can be written while the server is down or refuses writes (a
        # restart, a failover, read-only mode): a lease that ends then, or before the
        # worker's error backoff brings it back, is recovered by design, and the re-run
        # is journaled stale-recovered.
        # The window opens a second early: an outcome returned just before the outage is
        # written by the loop's next iteration, which the outage may already meet.
        refused = [
            (start - 1.0, end + db.errors.ERROR_BACKOFF.cap)
            for what, (start, end) in self.windows.items()
            if what in ("writes refused", "restart", "failover")
        ]
        # A partition longer than the lease costs the partitioned worker the outcomes it
        # held by design (the ownership guard must refuse them).
        partitioned = [
            (self.workers[h.worker - 1].proc.pid, h.at - CUT_OFF_MARGIN, h.healed or float("inf"))
            for h in self.holes
        ]
        # Under the slow database, the leases shorter than the workers' default (the
        # 1 s and 1.5 s kinds) are shorter than a few delayed round trips: they may end
        # before a completion is written, and the job is recovered (journaled). Leases
        # of the default must hold.
        leases = {k: t.lease or self.cfg.lease for k, t in harness.TASKS.items()}
        short = {k for k, lease in leases.items() if lease < self.cfg.lease}
        slowed = [
            (start - CUT_OFF_MARGIN, end + self.cfg.lease)
            for what, (start, end) in self.windows.items()
            if what == "slow"
        ]
        drops = dropped_outcomes(
            events, history.parse_runs(lines), self.faults, leases, refused, partitioned,
            slowed, short, self.faults.connection,
        )  # fmt: skip
        self.dropped, self.expired_in_outage, self.lost_to_partition, self.short_when_slow = drops
        # Any other dropped outcome is a write the worker gave up on.
        for d in self.dropped:
            report.violate(d)
        # How long a completion took to be written after its handler returned.
        finished: dict[tuple[int, int], float] = {}
        after = 0
        while True:
            rows = await self._fetch("maintenance/history_jobs", after, 10_000)
            if not rows:
                break
            after = rows[-1]["id"]
            for r in rows:
                if r["status"] == "completed" and r["finished_at"] is not None:
                    finished[(r["id"], r["attempt"])] = r["finished_at"].timestamp()
        lags = sorted(
            finished[(r.job, r.attempt)] - r.end
            for r in history.parse_runs(lines)
            if r.outcome == "complete" and r.end is not None and (r.job, r.attempt) in finished
        )
        if lags:
            self.settle_lag = (
                f"p50 {lags[len(lags) // 2]:.2f} s, p99 {lags[int(len(lags) * 0.99)]:.2f} s, "
                f"max {lags[-1]:.2f} s ({len(lags)} completions)"
            )
        # The soak's check calls every release a SIGTERM drain; these came before one.
        self.early_releases = sum(
            1
            for e in events
            if e.event == "released"
            and e.at < self.faults.terms.get(history.pid_of(e.worker), float("inf"))
        )
        for d in self.dropped[:10]:
            self.log(f"dropped outcome: {d}")
        return report

    # --- the figures -------------------------------------------------------------------

    def _noticed(self, hole: Hole) -> str:
        """How long the worker took to give up on a black-holed connection: the first one
        it closed, or the first new connection it opened, after the black-hole began."""
        # Until the partition healed, or the harness signalled the worker (a connection it
        # closes while exiting, or the kernel's close at a SIGKILL, is not noticing).
        w = self.workers[hole.worker - 1]
        stop = min(hole.healed or time.time(), w.signalled or time.time())
        closed = [x.closed for x in hole.links if x.closed is not None and x.closed_by == "client"]
        opened = [x.opened for x in hole.proxy.links if x.opened > hole.at]
        seen = [t for t in closed + opened if t <= stop]
        if seen:
            return f"{min(seen) - hole.at:.1f} s"
        still = sum(1 for x in hole.links if x.closed is None or x.closed > stop)
        return f"never: {still} of {len(hole.links)} still open after {stop - hole.at:.0f} s"

    def _first_log_after(self, n: int, at: float) -> str:
        w = self.workers[n - 1]
        for line in w.log_path.read_text(errors="replace").splitlines():
            try:
                stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            if stamp >= at and (" WARNING " in line or " ERROR " in line):
                return f"{stamp - at:.1f} s: {line[24:140]}"
        return "nothing logged"

    def _pickup_gap(self) -> str:
        if "failover" not in self.windows:
            return "-"
        fault_at, fault_end = self.windows["failover"]
        starts = []
        for f in sorted(self.runs_dir.glob("runs-*.txt")):
            for line in f.read_text().splitlines():
                parts = line.split()
                if len(parts) == 6 and parts[0] == "S":
                    starts.append(float(parts[5]))
        starts.sort()
        before = [t for t in starts if t < fault_at]
        after = [t for t in starts if t >= (fault_end)]
        if not before or not after:
            return "no run on one side of the fault"
        gap = after[0] - before[-1]
        tail = after[0] - (fault_end)
        return f"{gap:.2f} s (last run start before the fault -> first after; {tail:.2f} s after promotion)"

    def figures(self, rep: history.Report) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [("scenario", self.name)]
        faults = {
            k: v
            for k, v in self.counters.items()
            if k in ("failovers", "black-holes", "write refusals", "slow periods")
        }
        rows.append(("faults by kind", ", ".join(f"{k}: {v}" for k, v in faults.items()) or "-"))
        rows.append(
            (
                "enqueue errors (retried) by type",
                ", ".join(f"{k}: {v}" for k, v in sorted(self.enqueue_errors.items())) or "none",
            )
        )
        if self.name in ("failover", "all"):
            rows.append(("pickup gap around the failover", self._pickup_gap()))
        for hole in self.holes:
            rows.append(
                (f"worker #{hole.worker}: noticed its black-holed connections", self._noticed(hole))
            )
            rows.append(
                (
                    f"worker #{hole.worker}: first warning after the black-hole",
                    self._first_log_after(hole.worker, hole.at),
                )
            )
        if "slow" in self.windows:
            start, end = self.windows["slow"]
            span = end - start
            for w in self.workers:
                during = self.rate_during.get(w.n, 0) - self.rate_before.get(w.n, 0)
                rows.append(
                    (f"worker #{w.n}: chunks sent per second while slow", f"{during / span:.1f}")
                )
        logs = Counter[str]()
        for w in self.workers:
            text = w.log_path.read_text(errors="replace")
            for needle in (
                "the database refused to store this outcome",
                "read-only transaction",
                "database error in the worker loop",
                "heartbeat failed",
                "LISTEN connection lost",
                "released job",
                "no longer holds its claim",
            ):
                logs[needle] += text.count(needle)
        for needle, count in logs.items():
            rows.append((f"worker log lines: {needle!r}", count))
        rows.append(
            ("outcomes dropped while the claim was owned (job run again)", len(self.dropped))
        )
        if self.name in ("refused-writes", "failover", "all"):
            rows.append(
                (
                    "outcomes whose lease ended while the server was down or refused writes "
                    "(re-run, journaled)",
                    self.expired_in_outage,
                )
            )
        if "slow" in self.windows:
            rows.append(
                (
                    "statements (chunks) the proxies delayed",
                    sum(x.stats.delayed for p in self.proxies for x in p.links),
                )
            )
            rows.append(
                (
                    "outcomes whose lease ended while slow: a lease under the default, or a "
                    "cut connection (re-run, journaled)",
                    self.short_when_slow,
                )
            )
        if self.holes:
            rows.append(
                (
                    "outcomes a black-holed worker held past its lease (re-run, journaled)",
                    self.lost_to_partition,
                )
            )
        rows.append(("handler's return -> its completion written", self.settle_lag))
        rows.append(("claims released before any SIGTERM (orphan release)", self.early_releases))
        rows.append(
            (
                "workers SIGKILLed after a SIGTERM they ignored",
                self.counters["workers hung at SIGTERM"],
            )
        )
        return rows

    def summarize(self, rep: history.Report, elapsed: float) -> str:
        base = super().summarize(rep, elapsed)
        rows = self.figures(rep)
        self.figure_values = dict(rows)
        width = max(len(k) for k, _ in rows)
        extra = [f"| {'scenario figure':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
        extra += [f"| {k:<{width}} | {v} |" for k, v in rows]
        return "\n".join(extra) + "\n\n" + base


def dropped_outcomes(
    events: list[history.Event],
    runs: list[history.Run],
    faults: history.Faults,
    leases: dict[str, float],
    refused: Sequence[tuple[float, float]] = (),
    partitioned: Sequence[tuple[int, float, float]] = (),
    slowed: Sequence[tuple[float, float]] = (),
    short: frozenset[str] | set[str] = frozenset(),
    cuts: Sequence[tuple[float, float]] = (),
) -> tuple[list[str], int, int, int]:
    """Claims whose handler returned an outcome while the claim was still owned (before
    its lease ended, and before any shutdown), and which then ended by an interruption
    (stale-recovered or released) instead of that outcome: the worker dropped a result it
    had, and the job ran again. The soak's check explains such a re-run by the
    interruption; it is still a write the worker gave up on.

    Also returns how many such claims are explained by ``refused``: windows in which the
    server was down or refused every write, holding both the handler's return and the claim's end,
    so the outcome could not be written before the lease ended; and how many by
    ``partitioned``: (pid, start, end) of a worker whose connections were black-holed
    when its handler returned; and how many by ``slowed``: windows of a slow database in
    which a kind with a ``short`` lease (below the workers' default) lost its claim, or in
    which a connection fault (``cuts``: backend kills, restarts) came between the
    handler's return and the lease's end: a slowed loop iteration that loses its
    connection takes a reconnect and its statements again, longer than a 4 s lease."""
    claims: dict[tuple[int, int], history.Event] = {}
    ends: dict[tuple[int, int], history.Event] = {}
    for e in sorted(events, key=lambda e: e.at):
        key = (e.job, e.attempt)
        if e.event == "claimed":
            claims[key] = e
        elif e.event in history.INTERRUPTIONS and key not in ends:
            ends[key] = e
    out: list[str] = []
    explained = partition = too_short = 0
    for r in runs:
        key = (r.job, r.attempt)
        c, end = claims.get(key), ends.get(key)
        if c is None or end is None or r.end is None or r.outcome in (None, "pause-cancel"):
            continue
        if history.pid_of(c.worker) != r.pid:
            continue
        stop = min(
            c.at + leases.get(r.kind, 0.0),
            faults.terms.get(r.pid, float("inf")),
            faults.kills.get(r.pid, float("inf")) - CUT_OFF_MARGIN,
        )
        if r.end < stop - 0.05:
            if any(start <= r.end and stop <= end for start, end in refused):
                explained += 1
                continue
            if any(pid == r.pid and start <= r.end <= end for pid, start, end in partitioned):
                partition += 1
                continue
            if any(start <= r.end <= end for start, end in slowed) and (
                r.kind in short or any(a <= stop and b >= r.end for a, b in cuts)
            ):
                too_short += 1
                continue
            out.append(
                f"job {r.job} ({r.kind}) attempt {r.attempt}: pid {r.pid}'s handler returned "
                f"{r.outcome} at {r.end:.3f}, {stop - r.end:.2f}s before its claim could end, "
                f"and the claim ended {end.event} at {end.at:.3f} by {end.worker}"
            )
    return out, explained, partition, too_short


async def run(
    name: str, seconds: float | None = None, seed: int = 1, out_dir: Path | None = None,
    echo: Any = print, min_jobs: int | None = None,
) -> harness.Result:  # fmt: skip
    if name not in NAMES:
        raise ValueError(f"scenario must be one of {', '.join(NAMES)}, got {name!r}")
    cfg = replace(ALL if name == "all" else BASE, mode=name, seed=seed)
    if seconds is not None:
        cfg = replace(cfg, seconds=seconds)
    if min_jobs is not None:
        cfg = replace(cfg, min_jobs=min_jobs)
    own = out_dir is None
    out = out_dir or Path(tempfile.mkdtemp(prefix=f"venturi-chaos-{name}-"))
    result = await Scenario(name, cfg, out, echo).run()
    if own and result.ok:
        shutil.rmtree(out, ignore_errors=True)
        result.out_dir = None
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos.scenarios", description=__doc__)
    p.add_argument("name", choices=NAMES)
    p.add_argument("--seconds", type=float, default=None, help="load duration (default 45)")
    p.add_argument("--seed", type=int, default=None, help="the job mix's seed (default: random)")
    p.add_argument("--keep", metavar="DIR", default=None, help="keep logs and records in DIR")
    p.add_argument(
        "--min-jobs",
        type=int,
        default=None,
        help="keep enqueueing past --seconds until this many jobs (all: 200,000)",
    )
    args = p.parse_args(argv)
    if args.seconds is not None and args.seconds < 10:
        p.error("--seconds: at least 10 (the faults are placed in its middle)")
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    out = Path(args.keep) if args.keep else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyError):
        os.environ.pop("VENTURI_DSN")
    result = asyncio.run(run(args.name, args.seconds, seed, out, min_jobs=args.min_jobs))
    print()
    print(result.summary)
    if result.out_dir is not None:
        print(f"\nlogs, schedule and run records: {result.out_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
