"""The claim's plan and the live table's statistics: a slow claim into a backlog looks at
them, and analyzes the table when they are stale.

The claim's generic plan is made from the planner's statistics of ``jobs``. A burst
enqueued into a new queue, or into one that was idle when it was last analyzed, looks to
the planner like a handful of pending rows: it then sorts every pending job on each
claim instead of reading the first few from ``jobs_claim_idx`` (12 ms a claim at 20,000
pending against 0.6 ms once analyzed; benchmarks/README.md, "A table without fresh
statistics"). Since migration 21 (``jobs_claim_idx`` holds only the jobs without a group)
``job_claim``'s plan reads the index even without statistics in the cases the tests try
(30,000 and 100,000 pending, never analyzed or analyzed empty); the check stays for the
plans that may still misjudge a backlog (other table shapes, the capped claim).
Autovacuum analyzes such a table within a naptime (a minute by default) on a server where
it is on; the worker does not wait for it. A full claim that took more than
``SLOW_CLAIM`` asks at most every ``CHECK_EVERY`` whether the pending rows outnumber what
the last ANALYZE saw (``job_statistics_state``: counted, up to a bound, only while that
was a small backlog), and if so runs ``ANALYZE (SKIP_LOCKED)`` on the live table, which
makes PostgreSQL plan the claim anew. A fast claim, the steady state, asks nothing; nor
does a table whose last ANALYZE saw a backlog of ``ENOUGH`` or more, whose plan already
reads the index (a busy drain changes every row twice without needing new statistics).
"""

from __future__ import annotations

import logging
import time

from venturi import db
from venturi.db.conn import Conn
from venturi.runtime.instruments import Instruments

log = logging.getLogger("venturi.worker")

# A full claim slower than this makes the loop look at the statistics: a claim of a few
# dozen rows from the claim index takes about a millisecond, and one sorting a backlog
# of ten thousand rows about ten.
SLOW_CLAIM = 0.005
# At most one look per this many seconds (a catalog read and a bounded count, no lock).
CHECK_EVERY = 2.0
# Stale: more pending rows than FACTOR times those the last ANALYZE saw, plus MINIMUM,
# while it saw fewer than ENOUGH (from which the claim's plan reads the claim index
# whatever the backlog: seen at 5,000 pending on the benchmark machine). Counting stops
# past the bound: at most FACTOR * ENOUGH + MINIMUM index entries (22,000).
FACTOR = 2.0
MINIMUM = 2_000
ENOUGH = 10_000


class Statistics:
    """One worker run's watch on the live table's statistics, and on the groups table's
    (see the module)."""

    def __init__(self, schema: str, instruments: Instruments) -> None:
        self.schema = schema
        self.stats = instruments.stats
        self.checked_at = float("-inf")
        self.groups_checked_at = float("-inf")
        # Said once per run and table: this role cannot analyze it.
        self.refused = False
        self.groups_refused = False

    async def after_claim(self, conn: Conn, full: bool, took: float) -> None:
        """Called after each claim: ``full`` if it filled its batch (a backlog), ``took``
        its round trip in seconds."""
        if not full or took < SLOW_CLAIM or self.refused:
            return
        now = time.monotonic()
        if now - self.checked_at < CHECK_EVERY:
            return
        self.checked_at = now
        stale, allowed = await db.operations.job_statistics_state(
            conn, schema=self.schema, factor=FACTOR, minimum=MINIMUM, enough=ENOUGH
        )
        if stale:
            self.refused = not await self._analyze(conn, "jobs", allowed, took)

    async def after_grouped_claim(self, conn: Conn, full: bool, took: float) -> None:
        """Called after each grouped claim, as ``after_claim``: a slow full one looks at
        the groups table's statistics (ready groups the planner does not know of make the
        claim read every ready group and sort them)."""
        if not full or took < SLOW_CLAIM or self.groups_refused:
            return
        now = time.monotonic()
        if now - self.groups_checked_at < CHECK_EVERY:
            return
        self.groups_checked_at = now
        stale, allowed = await db.operations.group_statistics_state(
            conn, schema=self.schema, factor=FACTOR, minimum=MINIMUM, enough=ENOUGH
        )
        if stale:
            self.groups_refused = not await self._analyze(conn, "groups", allowed, took)

    async def _analyze(self, conn: Conn, table: str, allowed: bool, took: float) -> bool:
        """ANALYZE ``table`` (jobs or groups), whose statistics are stale, if this role
        may; whether it could."""
        if not allowed:
            log.warning(
                "the claims are slow and the statistics of %s.%s are stale, but this role "
                "does not own the table and cannot ANALYZE it: autovacuum (or its owner) "
                "must (docs/worker.md, 'Statistics of the live table')",
                self.schema,
                table,
            )
            return False
        started = time.monotonic()
        if table == "jobs":
            await db.operations.job_analyze(conn, schema=self.schema)
        else:
            await db.operations.group_analyze(conn, schema=self.schema)
        self.stats["analyzed" if table == "jobs" else "analyzed_groups"] += 1
        log.info(
            "analyzed %s.%s in %.0f ms: a claim of a backlog took %.0f ms and the "
            "table's statistics were stale, so the claim is planned anew",
            self.schema,
            table,
            (time.monotonic() - started) * 1000,
            took * 1000,
        )
        return True
