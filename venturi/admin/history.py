"""The history table by hand: move finished jobs out of the live table in batches
(``venturi.maintenance.History`` runs ``move_to_history`` on its timer).

The worker's statements read and write the live table ``jobs`` alone; a finished job left
there costs every claim, settlement and vacuum of it a little, and the dashboard's indexes
on it a lot. Moved to ``jobs_history``, it reads the same through ``all_jobs``: the moves
change where a job is, never what any read returns.
"""

from __future__ import annotations

from typing import Any

import msgspec

from venturi import db, validate
from venturi.db.operations import MOVE_BATCH
from venturi.sql import DEFAULT_SCHEMA
from venturi.validate import seconds

# What venturi.admin exports from here.
__all__ = [
    "MOVE_BATCH",
    "Moved",
    "move_to_history",
]


class Moved(msgspec.Struct, frozen=True):
    """A pass of ``move_to_history``: ``jobs`` moved; ``caught_up``: no job finished long
    enough ago is left in the live table (as far as this pass saw: rows another pass or an
    operator held are left for the next), else the budget ran out."""

    jobs: int
    caught_up: bool


async def move_to_history(
    conn: Any,
    *,
    after: float = 0.0,
    batch: int = MOVE_BATCH,
    budget: float | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> Moved:
    """Move the jobs finished more than ``after`` seconds ago from the live table to the
    history, ``batch`` per transaction, until none is left or ``budget`` seconds have
    passed. ``conn``: a connection (not in a transaction) or a pool. Safe in many workers
    at once: each batch skips the rows another has locked."""
    after = seconds(after, "history after", allow_zero=True)
    validate.integer(batch, "history batch")
    if budget is not None:
        budget = seconds(budget, "history budget")
    return Moved(
        *await db.operations.job_history_move_all(
            conn, schema=schema, after=after, batch=batch, budget=budget
        )
    )
