"""What each index of ``jobs`` costs the hot path, in the server's CPU time (issue 27).

    python -m benchmarks.tools.index_cost --rounds 3 --jobs 50000 \\
        --without jobs_kind_id_idx --without jobs_next_visible_idx

For the full schema and for each ``--without`` variant (the schema less that index,
dropped after the schema is applied; several names joined by ``+`` drop them together),
in turn, round after round: bulk enqueue of ``--jobs`` no-op jobs in calls of 1,000
(``venturi.enqueue_many``), then claim and complete them all in the worker's shape
(``job_claim`` of 10 rows, each claim settling the previous 10, one connection). The
figures are the CPU time of the **server backend** that ran each part (``utime + stime``
of its process, from ``/proc``, so the server must run on this machine), per job: what
the server did, which the other work on a shared machine slows but does not add to, as
it adds to a rate. Also the WAL written per job (``pg_current_wal_lsn``, cluster-wide:
anything else writing on the server counts too). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from benchmarks import ceiling
from benchmarks.common import add_dsn_option, create_database, drop_database, save_run
from benchmarks.sql import index_drop
from benchmarks.sql import statement as bsql
from benchmarks.systems.venturi import noop_jobs
from venturi import db, sql

SCHEMA = sql.DEFAULT_SCHEMA
TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) the server process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def wal(conn: Any) -> int:
    return int(await conn.fetchval(bsql("wal_position")))


async def variant(dsn: str, defs: dict[str, str], drop: list[str], jobs: int) -> dict[str, float]:
    """One round of one variant: the enqueue's and the claims' server CPU per job (us)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(bsql("jobs_empty", SCHEMA))
        for d in defs.values():  # the dropped ones back first
            await conn.execute(d.replace(" INDEX ", " INDEX IF NOT EXISTS ", 1))
        for name in drop:
            await conn.execute(index_drop(name, SCHEMA))
        await conn.execute(bsql("jobs_vacuum", SCHEMA))
        await conn.execute(bsql("checkpoint"))
    finally:
        await conn.close()
    conn = await asyncpg.connect(dsn)  # a fresh session: no statement planned before the DDL
    try:
        pid = conn.get_server_pid()
        c0, w0 = backend_cpu(pid), await wal(conn)
        for start in range(0, jobs, 1_000):
            await venturi.enqueue_many(conn, noop_jobs(range(start, start + 1_000)))
        enqueue_us = (backend_cpu(pid) - c0) / jobs * 1e6
        enqueue_wal = (await wal(conn) - w0) / jobs
        await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
        await conn.execute(bsql("checkpoint"))
        claimer = await asyncpg.connect(dsn)
        try:
            text = sql.statement("job_claim", SCHEMA)
            names = ceiling.parameters("job_claim", SCHEMA)
            values = ceiling.claim_values(10, "index_cost")
            await claimer.prepare(text)
            kpid = claimer.get_server_pid()
            c0, w0, done = backend_cpu(kpid), await wal(conn), 0
            while True:
                rows = await claimer.fetch(text, *ceiling.bind(names, values, "job_claim"))
                done += len(values["done_ids"])
                claimed = ceiling.claimed_rows(rows)
                values.update(
                    done_ids=[r["id"] for r in claimed],
                    done_attempts=[r["attempt"] for r in claimed],
                    done_results=[None] * len(claimed),
                )
                if not claimed:
                    break
            claim_us = (backend_cpu(kpid) - c0) / done * 1e6
            claim_wal = (await wal(conn) - w0) / done
        finally:
            await claimer.close()
    finally:
        await conn.close()
    return {
        "enqueue_cpu_us": enqueue_us,
        "claim_complete_cpu_us": claim_us,
        "enqueue_wal_bytes": enqueue_wal,
        "claim_complete_wal_bytes": claim_wal,
    }


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    name = f"bench_index_cost_{os.getpid()}"
    dsn = await create_database(args.dsn, name)
    variants = {"full schema": [], **{f"without {w}": w.split("+") for w in args.without}}
    got: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    loads = [os.getloadavg()[0]]
    try:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=SCHEMA)
        defs = {
            r["indexname"]: r["indexdef"]
            for r in await conn.fetch(bsql("jobs_indexes", SCHEMA), SCHEMA)
        }
        await conn.close()
        for rnd in range(args.rounds):
            order = list(variants) if rnd % 2 == 0 else list(reversed(variants))
            for v in order:
                r = await variant(dsn, defs, variants[v], args.jobs)
                for k, x in r.items():
                    got[v].setdefault(k, []).append(x)
                shown = ", ".join(f"{k} {x:,.1f}" for k, x in r.items())
                print(f"round {rnd + 1} {v}: {shown}", flush=True)
            loads.append(os.getloadavg()[0])
    finally:
        await drop_database(args.dsn, name)
    return {"jobs": args.jobs, "rounds": args.rounds, "load_average": loads, "variants": got}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.index_cost")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--without", action="append", default=[], metavar="INDEX[+INDEX]")
    parser.add_argument("--json", metavar="PATH")
    add_dsn_option(parser)
    args = parser.parse_args(argv)
    import uvloop

    result = uvloop.run(amain(args))
    lines = [
        f"{args.jobs:,} jobs, {args.rounds} rounds, variants alternating; medians (every "
        f"round); load average (1 min): " + ", ".join(f"{x:.1f}" for x in result["load_average"])
    ]
    for v, figs in result["variants"].items():
        shown = "; ".join(
            f"{k} {statistics.median(xs):,.1f} ({' '.join(f'{x:,.1f}' for x in xs)})"
            for k, xs in figs.items()
        )
        lines.append(f"{v}: {shown}")
    print("\n".join(lines))
    if args.json:
        save_run(args.json, result, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
