"""What the steady state watches and does beside its worker (``benchmarks.scenarios.steady``):
the sample taken every interval, the harness's own VACUUM where the server's autovacuum is
off, and another session's transaction held open.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from venturi import sql

SCHEMA = sql.DEFAULT_SCHEMA
# Relations of the history table's design (issue 27), looked up when the run starts: on a
# venturi without them the samples read and size the hot table alone.
HISTORY_TABLE = f"{SCHEMA}.jobs_history"
ALL_JOBS = f"{SCHEMA}.all_jobs"


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
