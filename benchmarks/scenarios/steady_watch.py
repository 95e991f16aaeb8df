"""What the steady state watches and does beside its worker (``benchmarks.scenarios.steady``):
the sample taken every interval, the harness's own VACUUM where the server's autovacuum is
off, and another session's transaction held open.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from benchmarks.sql import statement as bsql
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
                await conn.execute(bsql("history_vacuum", SCHEMA))
            runs.append(time.monotonic() - t0)
    finally:
        await conn.close()


async def sample(conn: Any, since: Any, relation: str, history: bool) -> dict[str, Any]:
    """The jobs claimed since ``since`` (a server timestamp), read from ``relation``
    (``all_jobs``, or ``jobs``), and the sizes now (``history``: ``jobs_history``'s too)."""
    t0 = time.monotonic()
    row = await conn.fetchrow(bsql("steady_claimed", SCHEMA, relation=relation), since)
    sizes = await conn.fetchrow(bsql("steady_jobs_table", SCHEMA))
    out = {**dict(row), **dict(sizes)}
    if history:
        hist = await conn.fetchrow(bsql("steady_history_table", SCHEMA))
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
        await self.conn.fetch(
            sql.statement("maintenance/session_setting", SCHEMA),
            "idle_in_transaction_session_timeout",
            "0",
        )
        await self.conn.execute(bsql("hold_open", SCHEMA))
        row = await self.conn.fetchrow(bsql("hold_xid", SCHEMA))
        self.info.update(xid=row["xid"], opened_at=row["at"], pid=self.conn.get_server_pid())

    async def release(self) -> None:
        try:
            await self.conn.execute(bsql("hold_release", SCHEMA))
            self.info["released_at"] = await self.conn.fetchval(bsql("server_now", SCHEMA))
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
