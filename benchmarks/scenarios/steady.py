"""The steady state (issue 16, target 5; issue 27, targets 4 and 5): enqueue and drain at
a constant rate for a long time, with retention (and the history table's move) running,
and watch throughput, pickup and the tables' sizes; optionally with a transaction held
open by another session for part of the run.

    python -m benchmarks.scenarios.steady [--minutes 30] [--rate 0] [--sample 60] [--[no-]history]
        [--hold-open MINUTES --hold-at MINUTE] [--json out.json] [--plot out.png]

One database of its own. The rate is ``--rate`` jobs/s, or (0) 70% of the maximum
measured first: a c=32 drain of 20,000 jobs, whose completed rows stay and are ANALYZEd
(``--fresh``: truncated instead, a table without statistics). Then, for ``--minutes``:

- a producer enqueues every 100 ms the jobs due by then (``venturi.enqueue_many``, one
  transaction per tick), so the offered rate stays constant;
- one worker process (``Worker(concurrency=32)``, ``benchmarks.worker_proc``) with a
  ``Retention`` that deletes completed jobs ``--retention`` seconds after they finish,
  checked every 10 s, and (``--history``, the default where ``venturi.maintenance`` has
  ``History``) a ``History(interval=--history-every, batch=--history-batch)`` that moves
  finished jobs from the hot table (``jobs``) to ``jobs_history``; ``--no-history`` leaves
  it out. Where venturi has no ``History`` the flag is off and asking for it is an error;
- every ``--sample`` seconds (60) the harness records, for the jobs claimed in that
  interval: how many were completed, their pickup p50/p99 (``claimed_at - created_at``,
  server clocks: from the enqueue's transaction to the claim's), read through the
  ``all_jobs`` view where it exists (the hot and the history table as one), else from
  ``jobs``; and the sizes of the jobs table, its indexes and the journal, the hot table's
  live rows and dead tuples with its autovacuum runs (``pg_stat_user_tables``), and,
  where ``jobs_history`` exists, its heap and index sizes (summed over its partitions,
  if it has any), live and dead rows and autovacuum runs; and the age in transactions of
  the oldest snapshot or transaction of any session of the database (what holds back
  vacuum's horizon), and how long the sampling's own queries took (``sample_ms``: they
  scan the tables, since no index serves ``claimed_at``).

``--hold-open MINUTES`` (with ``--hold-at MINUTE``, 5): another connection runs
``BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current()`` (a snapshot and an xid,
no table touched, so no lock held: only vacuum's horizon is held back) and stays idle in
that transaction, then rolls back. It opens at the first interval boundary at or after
minute ``--hold-at`` and rolls back at the first at or after ``--hold-at + --hold-open``
(since the run's start), so every interval lies wholly before, during or after the hold
(``phase`` in each sample); choose minutes that are multiples of ``--sample``. The
summary gives, for before (the warm-up left out), during and after: the median
throughput and pickup p50/p99, the worst interval during the hold, and in which interval
after the release throughput came back within 10% of the before median, either way (an
interval still draining the backlog above 110% is not back yet), and whether it stayed
there, and in which p99 came back to at most the before phase's highest; and the tables'
sizes and dead tuples at the hold, at most during it and at the end.

The targets: throughput per interval within 10% of the median (the first interval, the
warm-up, left out; with a hold, the intervals before it only), and the sizes bounded
(the last third's maximum at most 1.5x the first third's), the hot table's and, where it
exists, the history table's, each table with its indexes. ``--plot`` draws throughput,
pickup, the tables' sizes and rows over time, the hold shaded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from benchmarks import common
from benchmarks.common import add_dsn_option, git_head, scratch_database, versions, write_json
from benchmarks.harness import run_worker, spawn_worker, worker_failed
from benchmarks.scenarios.steady_report import hold_lines, hold_summary, plot, rescore, targets
from benchmarks.scenarios.steady_watch import ALL_JOBS, HISTORY_TABLE, SCHEMA, Hold, sample, vacuum
from benchmarks.sql import statement as bsql
from benchmarks.systems.venturi import history_task, noop_jobs
from venturi import db, sql

TICK = 0.1
RETENTION_EVERY = 10


def log(msg: str) -> None:
    common.log(msg, "steady")


def worker_spec(
    dsn: str,
    target: int,
    timeout: float,
    args: argparse.Namespace | None = None,
) -> dict[str, Any]:
    """The worker at c=32; with ``args``, the steady state's maintenance beside it
    (retention, the history task, the Vacuum task) and its commit setting."""
    cfg: dict[str, Any] = {"concurrency": 32}
    if args is not None:
        if args.vacuum_task:
            cfg["vacuum_task"] = True
            cfg["vacuum_every"] = args.vacuum_task
        cfg["retention_s"] = args.retention
        cfg["retention_every"] = RETENTION_EVERY
        if args.history:
            cfg["history"] = True
            cfg["history_every"], cfg["history_batch"] = args.history_every, args.history_batch
    if args is not None and args.no_synchronous_commit:
        cfg["synchronous_commit"] = False
    return {
        "system": "venturi",
        "dsn": dsn,
        "cfg": cfg,
        "mode": "drain",
        "target": target,
        "loop": "uvloop",
        "timeout": timeout,
    }


async def measure_max(conn: Any, dsn: str, jobs: int = 20_000, relaxed: bool = False) -> float:
    """A c=32 drain of ``jobs`` by one worker (with the steady state's commit setting, no
    maintenance): the rate the steady state's is a share of."""
    for start in range(0, jobs, 10_000):
        await venturi.enqueue_many(conn, noop_jobs(range(start, min(start + 10_000, jobs))))
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    spec = worker_spec(dsn, jobs, 300)
    if relaxed:
        spec["cfg"]["synchronous_commit"] = False
    r = await run_worker(spec)
    return float((r["count"] - 1) / ((r["t_target"] or r["t_last"]) - r["t_first"]))


async def produce(conn: Any, rate: float, until: float, sent: list[int]) -> None:
    start = time.monotonic()
    while (now := time.monotonic()) < until:
        due = int((now - start) * rate) - sent[0]
        if due > 0:
            first = sent[0]
            await venturi.enqueue_many(conn, noop_jobs(range(first, first + due)))
            sent[0] += due
        await asyncio.sleep(
            max(0.0, start + (int((now - start) / TICK) + 1) * TICK - time.monotonic())
        )


async def prepare(conn: Any, dsn: str, args: argparse.Namespace, out: dict[str, Any]) -> str:
    """The schema, what this venturi has (the history table, the ``all_jobs`` view), the
    rate (measured first unless ``--rate``) and the table's state at the start; the
    relation the samples read."""
    await db.schema.apply_schema(conn, schema=SCHEMA)
    has_table = await conn.fetchval(bsql("relation_exists", SCHEMA), HISTORY_TABLE)
    has_view = await conn.fetchval(bsql("relation_exists", SCHEMA), ALL_JOBS)
    source = "all_jobs" if has_view else "jobs"
    out.update(history=args.history, history_table=has_table, sampled_from=f"{SCHEMA}.{source}")
    log(
        f"history task {'on' if args.history else 'off'}; {HISTORY_TABLE} "
        f"{'exists' if has_table else 'does not exist'}; samples read {source}"
    )
    if args.history and not has_table:
        log(f"! --history, but the schema has no {HISTORY_TABLE}")
    rate = args.rate
    if args.maximum:
        out["max_jobs_per_s"] = args.maximum
    if not rate:
        top = await measure_max(conn, dsn, relaxed=args.no_synchronous_commit)
        rate = 0.7 * top
        out["max_jobs_per_s"] = top
        log(f"maximum (c=32 drain of 20,000): {top:,.0f} jobs/s; running at {rate:,.0f}")
    out["rate"] = rate
    out["server_autovacuum"] = await conn.fetchval(bsql("setting_value", SCHEMA), "autovacuum")
    if out["server_autovacuum"] != "on" and not args.vacuum_every:
        log("! the server runs with autovacuum = off: nothing vacuums the queue table")
    if args.table_settings:
        # An A/B of the queue table's storage parameters (autovacuum, fillfactor).
        await conn.execute(bsql("jobs_storage_set", SCHEMA, settings=args.table_settings))
    out["table_options"] = await conn.fetchval(bsql("jobs_reloptions", SCHEMA))
    if args.fresh:
        # A queue table without statistics: the claim's plan until autovacuum's first
        # ANALYZE (benchmarks/JOURNAL.md, "A table without fresh statistics").
        await conn.execute(bsql("jobs_empty", SCHEMA))
    else:
        # The completed jobs of the measurement stay (retention deletes them) and the
        # statistics describe a queue that has run, as in production.
        await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    out["vacuum_task"] = args.vacuum_task or None
    out["synchronous_commit"] = not args.no_synchronous_commit
    return source


def log_sample(s: dict[str, Any], phase: str | None, history: bool) -> None:
    hist = ""
    if history:
        hist = (
            f", history {s['history_heap'] / 2**20:.1f} MB + indexes "
            f"{s['history_indexes'] / 2**20:.1f} MB ({s['history_live_tup']:,} live, "
            f"{s['history_dead_tup']:,} dead, autovacuums "
            f"{s['history_autovacuum_count']})"
        )
    log(
        f"{s['minute']:>3}{f' [{phase}]' if phase else ''}: "
        f"{s['jobs_per_s']:,.0f} jobs/s claimed, pickup p50 "
        f"{s['p50_ms'] or 0:.1f} / p99 {s['p99_ms'] or 0:.1f} ms, pending {s['pending']:,}, "
        f"jobs {s['jobs_heap'] / 2**20:.1f} MB + indexes {s['jobs_indexes'] / 2**20:.1f} MB "
        f"({s['n_live_tup']:,} live, {s['n_dead_tup']:,} dead), "
        f"autovacuums {s['autovacuum_count']} (running: {s['vacuuming']}){hist}, "
        f"oldest xact age {s['oldest_xact_age'] or 0:,}, "
        f"harness vacuums {s['harness_vacuums']}, load {s['load_average']:.2f}"
    )


async def switch_hold(
    hold: Hold | None, phase: str | None, elapsed: float, args: Any
) -> str | None:
    """Open the hold at ``--hold-at``, release it at ``--hold-at + --hold-open``: the
    phase from now on."""
    if hold and phase == "before" and elapsed >= args.hold_at * 60:
        await hold.open()
        log(f"hold: transaction open (xid {hold.info['xid']}), idle")
        return "during"
    if hold and phase == "during" and elapsed >= (args.hold_at + args.hold_open) * 60:
        await hold.release()
        log(
            f"hold: released after {hold.info.get('seconds', 0):.1f} s"
            + (f" ({hold.info['error']})" if "error" in hold.info else "")
        )
        return "after"
    return phase


async def intervals(
    conn: Any, args: argparse.Namespace, out: dict[str, Any], hold: Hold | None, watch: Any
) -> None:
    """Sample every ``--sample`` seconds until the end of the run; ``watch`` holds the
    run's clock (``start``, ``until``), what was sent, the harness's vacuums and where
    the samples read (``source``, ``history``)."""
    # With a hold, each interval is wholly before, during or after it: the hold opens
    # and ends at interval boundaries (the first at or after its minute).
    phase = "before" if hold else None
    if hold and args.hold_at <= 0:
        phase = await switch_hold(hold, phase, 0.0, args)
    since = await conn.fetchval(bsql("server_now", SCHEMA))
    while time.monotonic() < watch["until"]:
        await asyncio.sleep(min(args.sample, max(0.0, watch["until"] - time.monotonic())))
        s = await sample(conn, since, watch["source"], watch["history"])
        # Over the interval as the server's clock measured it: the intervals run a
        # little long (the sampling's own queries) and the last one is cut at the end.
        s["seconds"] = (s["at"] - since).total_seconds()
        since = s["at"]
        s["minute"] = len(out["samples"]) + 1
        s["elapsed_s"] = time.monotonic() - watch["start"]
        s["sent"] = watch["sent"][0]
        s["load_average"] = os.getloadavg()[0]
        s["jobs_per_s"] = s["claimed"] / s["seconds"]
        s["harness_vacuums"] = len(watch["vacuums"])
        if phase is not None:
            s["phase"] = phase
        out["samples"].append(s)
        log_sample(s, phase, watch["history"])
        phase = await switch_hold(hold, phase, time.monotonic() - watch["start"], args)
    if hold and phase == "during":
        await hold.release()
        log("! hold: still open at the end of the run, released now")


async def steady_run(dsn: str, args: argparse.Namespace, out: dict[str, Any], hold: Any) -> None:
    conn = await asyncpg.connect(dsn)
    producer_conn = await asyncpg.connect(dsn)
    try:
        source = await prepare(conn, dsn, args, out)
        duration = args.minutes * 60
        proc, errors = await spawn_worker(
            worker_spec(dsn, 10**12, duration + 10, args), asyncio.subprocess.DEVNULL
        )
        await asyncio.sleep(2)  # the worker starts up
        start = time.monotonic()
        watch = {
            "start": start,
            "until": start + duration,
            "sent": [0],
            "vacuums": [],
            "source": source,
            "history": out["history_table"],
        }
        producer = asyncio.create_task(
            produce(producer_conn, out["rate"], watch["until"], watch["sent"])
        )
        vacuumer = None
        if args.vacuum_every:
            vacuumer = asyncio.create_task(
                vacuum(dsn, args.vacuum_every, watch["until"], watch["vacuums"], watch["history"])
            )
        await intervals(conn, args, out, hold, watch)
        await producer
        if vacuumer is not None:
            await vacuumer
        out["harness_vacuum_seconds"] = watch["vacuums"]
        await proc.communicate()
        if proc.returncode:
            log(f"! {worker_failed(proc, errors, 'the steady worker')}")
        errors.close()
    finally:
        await producer_conn.close()
        await conn.close()


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "samples": [],
    }
    async with scratch_database(args.dsn, f"bench_steady_{os.getpid()}") as dsn:
        hold = Hold(dsn) if args.hold_open else None
        try:
            await steady_run(dsn, args, out, hold)
        finally:
            if hold is not None:
                await hold.close()
                out["hold_info"] = hold.info
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    if hold is not None:
        out["hold"] = hold_summary(out)
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scenarios.steady",
        description=__doc__,
    )
    add_dsn_option(p)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--rate", type=float, default=0, help="jobs/s; 0: 70%% of the maximum")
    p.add_argument(
        "--maximum",
        type=float,
        default=0,
        help="with --rate: the maximum measured by an earlier run (jobs/s), for the report",
    )
    p.add_argument("--retention", type=float, default=120, help="seconds completed jobs stay")
    p.add_argument("--sample", type=float, default=60, help="seconds per interval")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start from a truncated table without statistics (default: ANALYZEd after "
        "the maximum's drain)",
    )
    p.add_argument(
        "--table-settings",
        default="",
        help="storage parameters set on the jobs table first, e.g. "
        "'autovacuum_vacuum_cost_delay = 0'",
    )
    p.add_argument(
        "--vacuum-every",
        type=float,
        default=0,
        help="seconds between VACUUM (ANALYZE) runs of the queue tables (and jobs_history) "
        "by the harness, standing in for autovacuum where the server has it off",
    )
    has_history = history_task() is not None
    p.add_argument(
        "--history",
        action=argparse.BooleanOptionalAction,
        default=has_history,
        help="run venturi.maintenance.History in the worker beside retention (moves "
        "finished jobs to jobs_history); default: on where venturi has it "
        f"({'it does' if has_history else 'this one does not'})",
    )
    p.add_argument(
        "--history-every", type=float, default=1.0, help="seconds between History's passes"
    )
    p.add_argument("--history-batch", type=int, default=5000, help="rows per History batch")
    p.add_argument(
        "--vacuum-task",
        type=float,
        default=0,
        metavar="SECONDS",
        help="run venturi.maintenance.Vacuum in the worker at this interval (as `venturi "
        "worker` does, every 5 s), beside the server's autovacuum",
    )
    p.add_argument(
        "--no-synchronous-commit",
        action="store_true",
        help="the worker runs with synchronous_commit=False",
    )
    add_hold_options(p)
    return p


def add_hold_options(p: argparse.ArgumentParser) -> None:
    """--hold-open and --hold-at (another session's transaction), and the outputs."""
    p.add_argument(
        "--hold-open",
        type=float,
        default=0,
        metavar="MINUTES",
        help="another session holds a transaction open (idle, a snapshot and an xid) this "
        "long; 0: none",
    )
    p.add_argument(
        "--hold-at",
        type=float,
        default=5,
        metavar="MINUTE",
        help="with --hold-open: the minute of the run it opens at (at the first interval "
        "boundary from then on)",
    )
    p.add_argument("--json")
    p.add_argument(
        "--plot",
        help="a PNG of throughput, pickup, the tables' sizes and rows over time",
    )
    p.add_argument(
        "--rescore",
        metavar="JSON",
        help="recompute an earlier run's rates from its samples' server timestamps and its "
        "targets (with --maximum if given), rewrite the JSON, print; runs nothing",
    )


def check(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse a run whose options contradict each other; warn of one that may mislead."""
    if args.sample <= 0:
        p.error("--sample must be more than 0 seconds")
    if args.history and history_task() is None:
        p.error("--history: this venturi has no venturi.maintenance.History")
    if args.history_every <= 0 or args.history_batch < 1:
        p.error("--history-every must be more than 0 and --history-batch at least 1")
    if args.hold_open < 0:
        p.error("--hold-open must be 0 (no hold) or more minutes")
    if args.hold_open and not args.rescore:
        if args.hold_at * 60 < 2 * args.sample:
            p.error("--hold-at must leave two intervals before the hold (the first is the warm-up)")
        if (args.hold_at + args.hold_open) * 60 + args.sample > args.minutes * 60:
            p.error("--minutes must leave at least one interval after --hold-at + --hold-open")
        for name, minutes in (("--hold-at", args.hold_at), ("--hold-open", args.hold_open)):
            if (minutes * 60) % args.sample:
                log(
                    f"! {name} {minutes:g} is not a multiple of --sample: the hold moves to "
                    "the next interval boundary"
                )
    if not args.rescore and args.retention < args.sample + RETENTION_EVERY:
        log(
            f"! --retention {args.retention:g} s < --sample + {RETENTION_EVERY} s: retention may "
            "delete jobs claimed early in an interval before it is sampled"
        )


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    check(p, args)
    if args.rescore:
        out = rescore(json.loads(Path(args.rescore).read_text()), args.maximum)
        args.json = args.json or args.rescore
    else:
        out = asyncio.run(amain(args))
    for met, what in targets(out):
        print(f"  {'MET   ' if met else 'MISSED'} {what}")
    if out.get("hold"):
        for line in hold_lines(out["hold"]):
            print(f"  HOLD   {line}")
    if args.json:
        write_json(args.json, out)
    if args.plot:
        plot(out, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
