"""The handler's side of the grouped runs' ledger (docs/chaos.md, "Groups in the soak"):
a run of a grouped kind writes an entry record before its work and an exit record after
it to ``venturi_chaos_ledger``, each in a statement of its own on a small pool of the
worker process's own (``$VENTURI_CHAOS_LEDGER_DSN``: direct to the server, never through
a fault proxy, so a black-holed worker's handlers go on writing like the zombies they
are). The records are stamped by the database's ``clock_timestamp()``.

A run is inside its group's slot from its entry's commit to its exit's: both lie inside
its claim, unless the claim was recovered under it (a zombie). A cancelled run (the
worker's shutdown) writes nothing to the database as it unwinds, since the worker
releases its job in the next pass of its loop: it appends ``Q <job> <attempt> <pid> cancel
<time>`` to its run file, synchronously, before that release.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import asyncpg

from ..support import sql as test_sql

DSN_ENV = "VENTURI_CHAOS_LEDGER_DSN"
# How long a run retries its entry before it gives up (its job fails and is retried),
# and its exit before it returns without one (its end is then its run file's E line).
ENTER_FOR = 30.0
EXIT_FOR = 60.0

_pool: Any = None


async def _get_pool() -> Any:
    global _pool
    if _pool is None:
        _pool = await asyncpg.create_pool(
            os.environ[DSN_ENV], min_size=0, max_size=4, timeout=5, command_timeout=5
        )
    return _pool


async def write(job: int, attempt: int, phase: str, kind: str, group: str, within: float) -> bool:
    """Write one record, retrying any error (a backend kill, a restart, refused writes, a
    failover) for ``within`` seconds; False if it never landed."""
    deadline = time.monotonic() + within
    pause = 0.05
    while True:
        try:
            pool = await _get_pool()
            await pool.execute(
                test_sql.statement("chaos_ledger_write"),
                job, attempt, phase, os.getpid(), kind, group,
            )  # fmt: skip
            return True
        except Exception:  # every failure is retried, then reported
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(pause)  # stays: backoff of a bounded retry
            pause = min(pause * 2, 0.5)
