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
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from venturi import Priority, db, sql, testing

from . import groupcheck, records, workflows
from .config import LONG, SHORT, TASKS, Config
from .fleet import Fleet, Worker
from .flowload import FlowLoad
from .groupload import ALL_MODULE, GROUP_MODULE, TASKS_MODULE, GroupLoad
from .grouptasks import GROUP_CAPS as GROUPED
from .soakcheck import SoakCheck
from .tasks import Chaos

# What the enqueuer retries: venturi's own list, which includes asyncpg's client-side
# errors (TargetServerAttributeNotMatched: no host of the multi-host DSN is writable,
# while writes are refused or during a failover).
TRANSIENT = db.errors.TRANSIENT

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


@dataclass
class Result:
    config: Config
    report: records.Report
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


class Harness(FlowLoad, GroupLoad, Fleet, SoakCheck):
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
        self.faults = records.Faults()
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

    async def _fetch_all(self, name: str, batch: int) -> list[Any]:
        """Every row of a read paged by id (``name`` takes the last id seen and a batch
        size), in order."""
        rows: list[Any] = []
        after = 0
        while page := await self._fetch(name, after, batch):
            after = page[-1]["id"]
            rows += page
        return rows

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

    # --- the monitor ------------------------------------------------------------------

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
