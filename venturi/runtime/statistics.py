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
    """One worker run's watch on the live table's statistics (see the module)."""

    def __init__(self, schema: str, instruments: Instruments) -> None:
        self.schema = schema
        self.stats = instruments.stats
        self.checked_at = float("-inf")
        # Said once per run: this role cannot analyze the table.
        self.refused = False

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
        if not stale:
            return
        if not allowed:
            self.refused = True
            log.warning(
                "the claims are slow and the statistics of %s.jobs are stale, but this role "
                "does not own the table and cannot ANALYZE it: autovacuum (or its owner) "
                "must (docs/worker.md, 'Statistics of the live table')",
                self.schema,
            )
            return
        started = time.monotonic()
        await db.operations.job_analyze(conn, schema=self.schema)
        self.stats["analyzed"] += 1
        log.info(
            "analyzed %s.jobs in %.0f ms: a claim of a backlog took %.0f ms and the "
            "table's statistics were stale, so the claim is planned anew",
            self.schema,
            (time.monotonic() - started) * 1000,
            took * 1000,
        )
