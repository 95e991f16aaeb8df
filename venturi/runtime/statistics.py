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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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


@dataclass
class Watched:
    """One table the watch looks at: its name, how its statistics are judged and how it
    is analyzed, the counter of ``Worker.stats`` its analyses go to, when it was last
    looked at and whether this role was found unable to analyze it (said once)."""

    table: str
    state: Callable[..., Awaitable[tuple[bool, bool]]]
    analyze: Callable[..., Awaitable[None]]
    counter: str
    checked_at: float = float("-inf")
    refused: bool = False


class Statistics:
    """One worker run's watch on the live table's statistics (``jobs``), and on the
    groups table's (``groups``; see the module)."""

    def __init__(self, schema: str, instruments: Instruments) -> None:
        self.schema = schema
        self.stats = instruments.stats
        ops = db.operations
        self.jobs = Watched("jobs", ops.job_statistics_state, ops.job_analyze, "analyzed")
        self.groups = Watched(
            "groups", ops.group_statistics_state, ops.group_analyze, "analyzed_groups"
        )

    async def after_claim(self, conn: Conn, full: bool, took: float) -> None:
        """Called after each claim: ``full`` if it filled its batch (a backlog), ``took``
        its round trip in seconds."""
        await self._look(self.jobs, conn, full, took)

    async def after_grouped_claim(self, conn: Conn, full: bool, took: float) -> None:
        """Called after each grouped claim, as ``after_claim``: ready groups the planner
        does not know of make the claim read every ready group and sort them."""
        await self._look(self.groups, conn, full, took)

    async def _look(self, watched: Watched, conn: Conn, full: bool, took: float) -> None:
        """A slow full claim looks at ``watched`` (at most every CHECK_EVERY) and analyzes
        it when its statistics are stale."""
        if not full or took < SLOW_CLAIM or watched.refused:
            return
        now = time.monotonic()
        if now - watched.checked_at < CHECK_EVERY:
            return
        watched.checked_at = now
        stale, allowed = await watched.state(
            conn, schema=self.schema, factor=FACTOR, minimum=MINIMUM, enough=ENOUGH
        )
        if not stale:
            return
        if not allowed:
            watched.refused = True
            log.warning(
                "the claims are slow and the statistics of %s.%s are stale, but this role "
                "does not own the table and cannot ANALYZE it: autovacuum (or its owner) "
                "must (docs/worker.md, 'Statistics of the live table')",
                self.schema,
                watched.table,
            )
            return
        started = time.monotonic()
        await watched.analyze(conn, schema=self.schema)
        self.stats[watched.counter] += 1
        log.info(
            "analyzed %s.%s in %.0f ms: a claim of a backlog took %.0f ms and the "
            "table's statistics were stale, so the claim is planned anew",
            self.schema,
            watched.table,
            (time.monotonic() - started) * 1000,
            took * 1000,
        )
