"""The steady state (issue 16, target 5; issue 27, targets 4 and 5): enqueue and drain at
a constant rate for a long time, with retention (and the history table's move) running,
and watch throughput, pickup and the tables' sizes; optionally with a transaction held
open by another session for part of the run.

    python -m benchmarks.steady [--minutes 30] [--rate 0] [--sample 60] [--[no-]history]
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
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from benchmarks import systems
from benchmarks.compare import DEFAULT_ADMIN_DSN, ROOT, git_head, versions
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA
TICK = 0.1
RETENTION_EVERY = 10
# Relations of the history table's design (issue 27), looked up when the run starts: on a
# venturi without them the samples read and size the hot table alone.
HISTORY_TABLE = f"{SCHEMA}.jobs_history"
ALL_JOBS = f"{SCHEMA}.all_jobs"


def log(msg: str) -> None:
    sys.stderr.write(f"[steady {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _spec(
    dsn: str,
    target: int,
    timeout: float,
    retention: float | None,
    history: tuple[float, int] | None = None,
    vacuum_task: float | None = None,
    synchronous_commit: bool = True,
) -> str:
    cfg: dict[str, Any] = {"concurrency": 32}
    if vacuum_task is not None:
        cfg["vacuum_task"] = True
        cfg["vacuum_every"] = vacuum_task
    if not synchronous_commit:
        cfg["synchronous_commit"] = False
    if retention is not None:
        cfg["retention_s"] = retention
        cfg["retention_every"] = RETENTION_EVERY
    if history is not None:
        cfg["history"] = True
        cfg["history_every"], cfg["history_batch"] = history
    return json.dumps(
        {
            "system": "venturi",
            "dsn": dsn,
            "cfg": cfg,
            "mode": "drain",
            "target": target,
            "loop": "uvloop",
            "timeout": timeout,
        }
    )


async def _worker(spec: str) -> Any:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.worker_proc",
        spec,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
    )


async def measure_max(
    conn: Any, dsn: str, jobs: int = 20_000, synchronous_commit: bool = True
) -> float:
    """A c=32 drain of ``jobs`` by one worker (with the steady state's commit setting, no
    maintenance): the rate the steady state's is a share of."""
    for start in range(0, jobs, 10_000):
        batch = range(start, min(start + 10_000, jobs))
        await venturi.enqueue_many(conn, [systems.venturi_noop.job(systems.Noop(i)) for i in batch])
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    proc = await _worker(_spec(dsn, jobs, 300, None, synchronous_commit=synchronous_commit))
    out, _ = await proc.communicate()
    r = json.loads(out.decode().strip().splitlines()[-1])
    return float((r["count"] - 1) / ((r["t_target"] or r["t_last"]) - r["t_first"]))


async def produce(conn: Any, rate: float, until: float, sent: list[int]) -> None:
    start = time.monotonic()
    while (now := time.monotonic()) < until:
        due = int((now - start) * rate) - sent[0]
        if due > 0:
            first = sent[0]
            await venturi.enqueue_many(
                conn, [systems.venturi_noop.job(systems.Noop(first + k)) for k in range(due)]
            )
            sent[0] += due
        await asyncio.sleep(
            max(0.0, start + (int((now - start) / TICK) + 1) * TICK - time.monotonic())
        )


async def vacuum(dsn: str, every: float, until: float, runs: list[float], history: bool) -> None:
    """VACUUM (ANALYZE) the queue tables (``history``: and ``jobs_history``) every
    ``every`` seconds: autovacuum's work, for a server that has autovacuum off (it is a
    cluster-wide setting)."""
    conn = await asyncpg.connect(dsn)
    try:
        while time.monotonic() + every < until:
            await asyncio.sleep(every)
            t0 = time.monotonic()
            await conn.execute(sql.statement("maintenance/vacuum_analyze", SCHEMA))
            if history:
                await conn.execute(f"VACUUM (ANALYZE) {HISTORY_TABLE}")
            runs.append(time.monotonic() - t0)
    finally:
        await conn.close()


async def sample(conn: Any, since: Any, source: str, history: bool) -> dict[str, Any]:
    """The jobs claimed since ``since`` (a server timestamp), read from ``source`` (the
    ``all_jobs`` view, or ``jobs``), and the sizes now (``history``: ``jobs_history``'s
    too)."""
    t0 = time.monotonic()
    # One statement, so one snapshot: a job the history task moves while it runs is seen
    # in exactly one of the two tables.
    row = await conn.fetchrow(
        f"""
        SELECT now() AS at,
               count(*) FILTER (WHERE status = 'completed') AS completed,
               count(*) AS claimed,
               percentile_cont(0.5) WITHIN GROUP (
                   ORDER BY extract(epoch FROM claimed_at - created_at)) * 1000 AS p50_ms,
               percentile_cont(0.99) WITHIN GROUP (
                   ORDER BY extract(epoch FROM claimed_at - created_at)) * 1000 AS p99_ms
        FROM {source} WHERE claimed_at >= $1 AND claimed_at < now()
        """,
        since,
    )
    sizes = await conn.fetchrow(
        f"""
        SELECT pg_relation_size('{SCHEMA}.jobs') AS jobs_heap,
               pg_indexes_size('{SCHEMA}.jobs') AS jobs_indexes,
               pg_total_relation_size('{SCHEMA}.journal') AS journal_total,
               s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.autoanalyze_count,
               s.n_tup_upd, s.n_tup_hot_upd,
               (SELECT count(*) FROM {SCHEMA}.jobs WHERE status = 'pending') AS pending,
               (SELECT count(*) FROM pg_stat_progress_vacuum v
                WHERE v.relid = '{SCHEMA}.jobs'::regclass) AS vacuuming,
               (SELECT max(greatest(age(a.backend_xmin), age(a.backend_xid)))
                FROM pg_stat_activity a
                WHERE a.datname = current_database()) AS oldest_xact_age
        FROM pg_stat_user_tables s WHERE s.relid = '{SCHEMA}.jobs'::regclass
        """
    )
    out = {**dict(row), **dict(sizes)}
    if history:
        # Summed over the table's leaves: a partitioned table's own size is zero, and a
        # plain one has no partition tree (it is its own single leaf).
        hist = await conn.fetchrow(
            f"""
            WITH leaves AS (
                SELECT relid FROM pg_partition_tree('{HISTORY_TABLE}') WHERE isleaf
                UNION
                SELECT c.oid::regclass FROM pg_class c
                WHERE c.oid = '{HISTORY_TABLE}'::regclass AND c.relkind = 'r'
            )
            SELECT coalesce(sum(pg_relation_size(l.relid)), 0) AS history_heap,
                   coalesce(sum(pg_indexes_size(l.relid)), 0) AS history_indexes,
                   coalesce(sum(s.n_live_tup), 0) AS history_live_tup,
                   coalesce(sum(s.n_dead_tup), 0) AS history_dead_tup,
                   coalesce(sum(s.autovacuum_count), 0) AS history_autovacuum_count,
                   count(*) AS history_partitions
            FROM leaves l LEFT JOIN pg_stat_user_tables s ON s.relid = l.relid
            """
        )
        out.update({k: int(v) for k, v in dict(hist).items()})
    out["sample_ms"] = (time.monotonic() - t0) * 1000
    return out


class Hold:
    """Another session's transaction left open, idle: a snapshot and an xid (no table
    touched, so no lock), which hold back the horizon below which vacuum may remove
    dead rows, in every table of the database."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None
        self.info: dict[str, Any] = {}

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)
        # The server's timeout, if it has one, would end the session before the hold does.
        await self.conn.execute("SET idle_in_transaction_session_timeout = 0")
        await self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        row = await self.conn.fetchrow("SELECT txid_current() AS xid, now() AS at")
        self.info.update(xid=row["xid"], opened_at=row["at"], pid=self.conn.get_server_pid())

    async def release(self) -> None:
        try:
            await self.conn.execute("ROLLBACK")
            self.info["released_at"] = await self.conn.fetchval("SELECT now()")
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as e:
            # The session ended under the hold (an operator, a timeout): say so.
            self.info["error"] = f"{type(e).__name__}: {e}"
        finally:
            await self.close()
        if "released_at" in self.info:
            self.info["seconds"] = (
                self.info["released_at"] - self.info["opened_at"]
            ).total_seconds()

    async def close(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            await conn.close(timeout=5)


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    database = f"bench_steady_{os.getpid()}"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f"CREATE DATABASE {database}")
    from venturi.testing.server import with_database

    dsn = with_database(args.dsn, database)
    out: dict[str, Any] = {
        "commit": git_head(),
        "versions": versions(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "samples": [],
    }
    hold = Hold(dsn) if args.hold_open else None
    try:
        conn = await asyncpg.connect(dsn)
        producer_conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=SCHEMA)
        has_table = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", HISTORY_TABLE)
        has_view = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", ALL_JOBS)
        source = ALL_JOBS if has_view else f"{SCHEMA}.jobs"
        out["history"] = args.history
        out["history_table"] = has_table
        out["sampled_from"] = source
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
            top = await measure_max(conn, dsn, synchronous_commit=not args.no_synchronous_commit)
            rate = 0.7 * top
            out["max_jobs_per_s"] = top
            log(f"maximum (c=32 drain of 20,000): {top:,.0f} jobs/s; running at {rate:,.0f}")
        out["rate"] = rate
        out["server_autovacuum"] = await conn.fetchval("SHOW autovacuum")
        if out["server_autovacuum"] != "on" and not args.vacuum_every:
            log("! the server runs with autovacuum = off: nothing vacuums the queue table")
        if args.table_settings:
            # An A/B of the queue table's storage parameters (autovacuum, fillfactor).
            await conn.execute(f"ALTER TABLE {SCHEMA}.jobs SET ({args.table_settings})")
        out["table_options"] = await conn.fetchval(
            f"SELECT reloptions::text FROM pg_class WHERE oid = '{SCHEMA}.jobs'::regclass"
        )
        if args.fresh:
            # A queue table without statistics: the claim's plan until autovacuum's
            # first ANALYZE (benchmarks/README.md, finding 2).
            await conn.execute(f"TRUNCATE {SCHEMA}.jobs, {SCHEMA}.journal CASCADE")
        else:
            # The completed jobs of the measurement stay (retention deletes them) and
            # the statistics describe a queue that has run, as in production.
            await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
        duration = args.minutes * 60
        history = (args.history_every, args.history_batch) if args.history else None
        out["vacuum_task"] = args.vacuum_task or None
        out["synchronous_commit"] = not args.no_synchronous_commit
        proc = await _worker(
            _spec(
                dsn,
                10**12,
                duration + 10,
                args.retention,
                history,
                args.vacuum_task or None,
                not args.no_synchronous_commit,
            )
        )
        await asyncio.sleep(2)  # the worker starts up
        start = time.monotonic()
        until = start + duration
        sent = [0]
        producer = asyncio.create_task(produce(producer_conn, rate, until, sent))
        vacuums: list[float] = []
        vacuumer = (
            asyncio.create_task(vacuum(dsn, args.vacuum_every, until, vacuums, has_table))
            if args.vacuum_every
            else None
        )
        # With a hold, each interval is wholly before, during or after it: the hold opens
        # and ends at interval boundaries (the first at or after its minute).
        phase = "before" if hold else None
        if hold and args.hold_at <= 0:
            await hold.open()
            phase = "during"
            log(f"hold: transaction open (xid {hold.info['xid']}), idle")
        since = await conn.fetchval("SELECT now()")
        while time.monotonic() < until:
            await asyncio.sleep(min(args.sample, max(0.0, until - time.monotonic())))
            s = await sample(conn, since, source, has_table)
            # Over the interval as the server's clock measured it: the intervals run a
            # little long (the sampling's own queries) and the last one is cut at the end.
            s["seconds"] = (s["at"] - since).total_seconds()
            since = s["at"]
            s["minute"] = len(out["samples"]) + 1
            s["elapsed_s"] = time.monotonic() - start
            s["sent"] = sent[0]
            s["load_average"] = os.getloadavg()[0]
            s["jobs_per_s"] = s["claimed"] / s["seconds"]
            s["harness_vacuums"] = len(vacuums)
            if phase is not None:
                s["phase"] = phase
            out["samples"].append(s)
            hist = ""
            if has_table:
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
                f"harness vacuums {len(vacuums)}, load {s['load_average']:.2f}"
            )
            elapsed = time.monotonic() - start
            if hold and phase == "before" and elapsed >= args.hold_at * 60:
                await hold.open()
                phase = "during"
                log(f"hold: transaction open (xid {hold.info['xid']}), idle")
            elif hold and phase == "during" and elapsed >= (args.hold_at + args.hold_open) * 60:
                await hold.release()
                phase = "after"
                log(
                    f"hold: released after {hold.info.get('seconds', 0):.1f} s"
                    + (f" ({hold.info['error']})" if "error" in hold.info else "")
                )
        if hold and phase == "during":
            await hold.release()
            log("! hold: still open at the end of the run, released now")
        await producer
        if vacuumer is not None:
            await vacuumer
        out["harness_vacuum_seconds"] = vacuums
        await proc.communicate()
        await producer_conn.close()
        await conn.close()
    finally:
        if hold is not None:
            await hold.close()
            out["hold_info"] = hold.info
        await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await admin.close()
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    if hold is not None:
        out["hold"] = hold_summary(out)
    return out


def _bounded(samples: list[dict[str, Any]], heap: str, indexes: str) -> tuple[float, float]:
    """The largest ``heap + indexes`` of the first third of the samples and of the last."""
    third = max(1, len(samples) // 3)
    first = max(s[heap] + s[indexes] for s in samples[:third])
    last = max(s[heap] + s[indexes] for s in samples[-third:])
    return first, last


def targets(out: dict[str, Any]) -> list[tuple[bool, str]]:
    samples = out["samples"][1:] or out["samples"]
    held = any(s.get("phase") for s in samples)
    # With a hold, the steady state's own drift is the one before it (target 5 reports
    # the rest, hold_summary).
    steady = [s for s in samples if s.get("phase") == "before"] if held else samples
    steady = steady or samples
    rates = [s["jobs_per_s"] for s in steady]
    med = statistics.median(rates)
    drift = max(abs(r - med) / med for r in rates) if med else float("inf")
    first, last = _bounded(out["samples"], "jobs_heap", "jobs_indexes")
    p99 = [s["p99_ms"] or 0 for s in samples]
    top = out.get("max_jobs_per_s")
    offered = []
    if top:
        offered = [
            (
                out["rate"] >= 0.65 * top,
                f"offered rate near 70% of the maximum: {out['rate']:,.0f} of {top:,.0f} "
                f"jobs/s ({out['rate'] / top:.0%})",
            )
        ]
    history = []
    if all(s.get("history_heap") is not None for s in out["samples"]):
        h_first, h_last = _bounded(out["samples"], "history_heap", "history_indexes")
        history = [
            (
                h_last <= 1.5 * h_first,
                f"history table + indexes bounded: {h_first / 2**20:.1f} MB (first third's "
                f"max) -> {h_last / 2**20:.1f} MB (last third's)",
            )
        ]
    return [
        *offered,
        (
            drift <= 0.10,
            f"throughput per interval within 10% of its median ({med:,.0f} jobs/s at an "
            f"offered {out['rate']:,.0f}"
            f"{f', the {len(steady)} intervals before the hold' if held else ''}): "
            f"largest deviation {drift:.1%}",
        ),
        (
            last <= 1.5 * first,
            f"jobs table + indexes bounded: {first / 2**20:.1f} MB (first third's max) -> "
            f"{last / 2**20:.1f} MB (last third's); pickup p99 per interval "
            f"{min(p99):.1f}-{max(p99):.1f} ms",
        ),
        *history,
    ]


def _median(samples: list[dict[str, Any]], key: str) -> float | None:
    values = [s[key] for s in samples if s.get(key) is not None]
    return statistics.median(values) if values else None


def hold_summary(out: dict[str, Any]) -> dict[str, Any]:
    """Target 5: throughput and pickup before (the warm-up left out), during and after the
    held transaction, the worst interval during it, the intervals after its release until
    throughput was back within 10% of the before median (and p99 at most before's
    highest), and the tables' sizes and dead rows around it."""
    samples = out["samples"]
    phases: dict[str, list[dict[str, Any]]] = {"before": [], "during": [], "after": []}
    for s in samples[1:]:
        if s.get("phase") in phases:
            phases[s["phase"]].append(s)
    res: dict[str, Any] = {"transaction": out.get("hold_info", {})}
    for name, group in phases.items():
        res[name] = {
            "intervals": [s["minute"] for s in group],
            "jobs_per_s": _median(group, "jobs_per_s"),
            "p50_ms": _median(group, "p50_ms"),
            "p99_ms": _median(group, "p99_ms"),
        }
    before, during, after = phases["before"], phases["during"], phases["after"]
    base = res["before"]["jobs_per_s"]
    if during:
        slow = min(during, key=lambda s: s["jobs_per_s"])
        late = max(during, key=lambda s: s["p99_ms"] or 0)
        res["during"]["slowest"] = {
            k: slow.get(k) for k in ("minute", "jobs_per_s", "p50_ms", "p99_ms", "pending")
        }
        res["during"]["highest_p99"] = {
            k: late.get(k) for k in ("minute", "jobs_per_s", "p50_ms", "p99_ms", "pending")
        }
    if base and after:
        within = [abs(s["jobs_per_s"] - base) / base <= 0.10 for s in after]
        back = within.index(True) + 1 if True in within else None
        res["after"]["throughput_back_in_interval"] = back
        res["after"]["throughput_stayed_back"] = back is not None and all(within[back - 1 :])
        ceiling = max((s["p99_ms"] or 0) for s in before) if before else None
        if ceiling is not None:
            ok = [(s["p99_ms"] or 0) <= ceiling for s in after]
            res["after"]["p99_ceiling_ms"] = ceiling
            res["after"]["p99_back_in_interval"] = ok.index(True) + 1 if True in ok else None
        res["after"]["seconds_per_interval"] = _median(after, "seconds")
    # The tables around the hold: at its start (the last interval before), at most during
    # it, and at the end of the run.
    last_before = before[-1] if before else samples[0]
    for table, heap, idx, dead in (
        ("jobs", "jobs_heap", "jobs_indexes", "n_dead_tup"),
        ("history", "history_heap", "history_indexes", "history_dead_tup"),
    ):
        if last_before.get(heap) is None:
            continue
        size = [s[heap] + s[idx] for s in (last_before, *during)]
        res[f"{table}_size"] = {
            "at_start": size[0],
            "max_during": max(size),
            "at_end": samples[-1][heap] + samples[-1][idx],
            "dead_at_start": last_before[dead],
            "dead_max_during": max(s[dead] for s in (last_before, *during)),
        }
    res["oldest_xact_age_max_during"] = max(
        (s.get("oldest_xact_age") or 0 for s in during), default=None
    )
    return res


def hold_lines(h: dict[str, Any]) -> list[str]:
    """The summary of hold_summary, one line each."""
    mb = 2**20
    t = h["transaction"]

    def phase(name: str) -> str:
        p = h[name]
        if p["jobs_per_s"] is None:
            return f"{name}: no interval"
        rel = ""
        if name != "before" and h["before"]["jobs_per_s"]:
            rel = f" ({p['jobs_per_s'] / h['before']['jobs_per_s']:.0%} of before)"
        return (
            f"{name} (intervals {p['intervals'][0]}-{p['intervals'][-1]}): median "
            f"{p['jobs_per_s']:,.0f} jobs/s{rel}, pickup p50 {p['p50_ms'] or 0:.1f} / p99 "
            f"{p['p99_ms'] or 0:.1f} ms"
        )

    lines = [
        f"a transaction held open {t.get('seconds', float('nan')):.0f} s by another session "
        f"(xid {t.get('xid')}, {t.get('opened_at')} -> {t.get('released_at')})"
        + (f"; ended early: {t['error']}" if t.get("error") else ""),
        phase("before"),
        phase("during"),
    ]
    if "slowest" in h["during"]:
        w, q = h["during"]["slowest"], h["during"]["highest_p99"]
        lines.append(
            f"worst during: interval {w['minute']} {w['jobs_per_s']:,.0f} jobs/s "
            f"(p99 {w['p99_ms'] or 0:.1f} ms, pending {w['pending']:,}); highest p99 "
            f"interval {q['minute']} {q['p99_ms'] or 0:.1f} ms ({q['jobs_per_s']:,.0f} jobs/s)"
        )
    lines.append(phase("after"))
    a = h["after"]
    if "throughput_back_in_interval" in a:
        back, p99 = a["throughput_back_in_interval"], a.get("p99_back_in_interval")
        lines.append(
            "recovery: throughput within 10% of before's median "
            + (
                f"in interval {back} after the release"
                + ("" if a["throughput_stayed_back"] else " (not staying there)")
                if back
                else "in none of the intervals after the release"
            )
            + f"; p99 at most before's highest ({a.get('p99_ceiling_ms') or 0:.1f} ms) "
            + (f"in interval {p99}" if p99 else "in none")
            + f" (intervals of {a['seconds_per_interval']:.0f} s)"
        )
    for table in ("jobs", "history"):
        z = h.get(f"{table}_size")
        if z:
            lines.append(
                f"{table} table + indexes: {z['at_start'] / mb:.1f} MB at the hold, at most "
                f"{z['max_during'] / mb:.1f} MB during it, {z['at_end'] / mb:.1f} MB at the "
                f"end; dead tuples {z['dead_at_start']:,} -> at most {z['dead_max_during']:,}"
            )
    if h.get("oldest_xact_age_max_during") is not None:
        lines.append(
            f"oldest transaction's age during the hold: up to "
            f"{h['oldest_xact_age_max_during']:,} xids"
        )
    return lines


def rescore(out: dict[str, Any], maximum: float = 0) -> dict[str, Any]:
    """An earlier run's rates over its intervals as the server's clock measured them
    (runs before 2d91365 divided by the nominal ``--sample``, which made the last, cut
    interval look slow), and its targets again."""
    from datetime import datetime

    samples = out["samples"]
    for prev, s in itertools.pairwise(samples):
        gap = datetime.fromisoformat(s["at"]) - datetime.fromisoformat(prev["at"])
        s["seconds"] = gap.total_seconds()
        s["jobs_per_s"] = s["claimed"] / s["seconds"]
    if maximum:
        out["max_jobs_per_s"] = maximum
    out["targets"] = [{"met": m, "target": t} for m, t in targets(out)]
    if any(s.get("phase") for s in samples):
        out["hold"] = hold_summary(out)
    return out


def plot(out: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = out["samples"]
    if all("seconds" in x for x in s):
        # Each point at its interval's end, in minutes of the server's clock.
        t = list(itertools.accumulate(x["seconds"] / 60 for x in s))
    else:  # runs before 2d91365
        t = [x["minute"] * out["args"]["sample"] / 60 for x in s]
    history = all(x.get("history_heap") is not None for x in s)
    fig, axes = plt.subplots(4, 1, figsize=(8, 12), sharex=True)
    axes[0].plot(t, [x["jobs_per_s"] for x in s], marker="o")
    axes[0].axhline(out["rate"], linestyle="--", color="gray", label="offered")
    axes[0].set_ylabel("jobs/s claimed")
    axes[1].plot(t, [x["p99_ms"] or 0 for x in s], marker="o", label="p99")
    axes[1].plot(t, [x["p50_ms"] or 0 for x in s], marker=".", label="p50")
    axes[1].set_ylabel("pickup, ms")
    positive = [v for x in s for v in (x["p50_ms"], x["p99_ms"]) if v]
    if positive and max(positive) > 50 * min(positive):
        axes[1].set_yscale("log")
    mb = 2**20
    axes[2].plot(t, [x["jobs_heap"] / mb for x in s], label="jobs heap")
    axes[2].plot(t, [x["jobs_indexes"] / mb for x in s], label="jobs indexes")
    if history:
        axes[2].plot(t, [x["history_heap"] / mb for x in s], label="history heap")
        axes[2].plot(t, [x["history_indexes"] / mb for x in s], label="history indexes")
    axes[2].plot(t, [x["journal_total"] / mb for x in s], label="journal")
    axes[2].set_ylabel("MB")
    axes[3].plot(t, [x["n_live_tup"] for x in s], label="jobs live rows")
    axes[3].plot(t, [x["n_dead_tup"] for x in s], label="jobs dead rows")
    axes[3].plot(t, [x["pending"] for x in s], label="pending")
    if history:
        axes[3].plot(t, [x["history_live_tup"] for x in s], label="history live rows")
        axes[3].plot(t, [x["history_dead_tup"] for x in s], label="history dead rows")
    axes[3].set_ylabel("rows")
    axes[3].set_xlabel("minutes")
    # The held transaction: from the end of the last interval before it to the end of
    # the last during it.
    ends = {x.get("phase"): i for i, x in enumerate(s)}
    if "during" in ends:
        first = next(i for i, x in enumerate(s) if x.get("phase") == "during")
        lo = t[first - 1] if first else 0.0
        for k, ax in enumerate(axes):
            label = "_" if k else "transaction held open"
            ax.axvspan(lo, t[ends["during"]], color="orange", alpha=0.15, label=label)
    for ax in axes:
        ax.legend(fontsize="small")
    what = f"steady state at {out['rate']:,.0f} jobs/s"
    if out.get("history"):
        what += ", history table"
    fig.suptitle(f"venturi {out['commit']}: {what}")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.steady", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
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
    has_history = systems.history_task() is not None
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
    args = p.parse_args(argv)
    if args.sample <= 0:
        p.error("--sample must be more than 0 seconds")
    if args.history and not has_history:
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
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    if args.plot:
        plot(out, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
