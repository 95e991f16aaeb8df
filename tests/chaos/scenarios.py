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
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from venturi import testing

from . import groupload, harness, records, standby
from .config import LONG, SHORT, Config
from .fleet import Worker
from .proxy import Proxy, Twin
from .scenariocheck import ScenarioCheck
from .scenariofaults import Hole, ScenarioFaults

NAMES = ("failover", "blackhole", "refused-writes", "slow", "all")
# Proxies for replacements nobody scheduled (a crash, a worker that found the server down
# at start): the long soak started 52 workers once, and the 52nd had none (IndexError).
SPARE_PROXIES = 12

# Process faults off: one kind of fault at a time. A shorter drain than the soak's: a
# scenario that cannot drain in 30 s has already shown what it breaks.
BASE = replace(
    SHORT,
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
    LONG,
    mode="scenario",
    seconds=660,
    min_jobs=200_000,
    drain_seconds=120,
)
# How long the harness waits for a SIGTERMed worker past its shutdown_timeout before it
# SIGKILLs it (and counts it as hung).
HUNG_AFTER = 10.0


class Scenario(ScenarioFaults, ScenarioCheck, harness.Harness):
    def __init__(self, name: str, config: Config, out: Path, echo: Any = print) -> None:
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

    def spawn(self, module: str = groupload.TASKS_MODULE) -> Worker:
        # The harness's own connection stays direct; the worker gets its proxy.
        own = self.dsn
        if self.proxies:
            self.dsn = self.proxies[len(self.workers)].dsn(own)
        try:
            return super().spawn(module)
        finally:
            self.dsn = own

    async def _reap(self, w: Worker, within: float) -> None:
        await super()._reap(w, min(within, self.cfg.shutdown_timeout + HUNG_AFTER))

    # Faults here last seconds (writes refused, a failover): retry longer, more often.
    enqueue_attempts = 200
    enqueue_pause_cap = 1.0

    def _enqueue_failed(self, exc: BaseException) -> None:
        # Which error an enqueuer must be ready to retry: counted by type.
        self.enqueue_errors[type(exc).__name__] += 1
        if self.enqueue_errors[type(exc).__name__] <= 3:
            self.log(f"enqueue failed ({type(exc).__name__}: {exc}); sending again")

    # --- the timetable of faults (the faults: tests/chaos/scenariofaults.py) -------------

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

    def fault_actions(self) -> dict[str, Callable[[], Awaitable[None]]]:
        return super().fault_actions() | {
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
        }

    async def restart_postgres(self) -> None:
        start = time.time()
        await super().restart_postgres()
        self.windows["restart"] = (start, time.time())

    # --- the extra check and the figures (tests/chaos/scenariocheck.py) --------------

    async def check(self) -> records.Report:
        report = await super().check()
        await self.check_outcomes(report)
        return report

    def summarize(self, rep: records.Report, elapsed: float) -> str:
        base = super().summarize(rep, elapsed)
        rows = self.figures(rep)
        self.figure_values = dict(rows)
        width = max(len(k) for k, _ in rows)
        extra = [f"| {'scenario figure':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
        extra += [f"| {k:<{width}} | {v} |" for k, v in rows]
        return "\n".join(extra) + "\n\n" + base


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
