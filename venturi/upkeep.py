"""The database work of the maintenance tasks and of ``get_result``.

Like ``venturi.store``, every function runs one named statement of ``sql_templates`` and
holds no SQL text; ``conn`` is an asyncpg Connection (the caller's transaction applies)
or Pool. Nothing here is on the worker's claim path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from venturi import sql

Record = Any  # asyncpg.Record: untyped


# --- results ------------------------------------------------------------------------


async def get_result_row(conn: Any, schema: str, job_id: int) -> Record | None:
    """kind, status, result (JSON text) and finished_seconds_ago of one job, or None."""
    return await conn.fetchrow(sql.statement("job_result_get", schema), job_id)


async def clear_expired_results(conn: Any, schema: str, kind: str, ttl: float, batch: int) -> int:
    """Clear up to ``batch`` results of ``kind`` older than ``ttl`` seconds; how many."""
    return int(
        await conn.fetchval(
            sql.statement("job_result_clear_expired", schema), kind, float(ttl), batch
        )
    )


# --- cron ---------------------------------------------------------------------------


async def list_schedules(conn: Any, schema: str, names: Sequence[str]) -> list[Record]:
    """One row per name: name, last_slot (None if never seen) and the database's now."""
    return list(await conn.fetch(sql.statement("schedule_list", schema), list(names)))


async def init_schedule(conn: Any, schema: str, name: str, slot: datetime) -> None:
    """Record a new schedule as having handled ``slot``; no-op when it is known."""
    await conn.execute(sql.statement("schedule_init", schema), name, slot)


async def advance_schedule(conn: Any, schema: str, name: str, slot: datetime) -> bool:
    """Move the schedule to ``slot`` if it is behind; True when this caller moved it (and
    so must enqueue the slot's job in the same transaction)."""
    row = await conn.fetchrow(sql.statement("schedule_advance_if_behind", schema), name, slot)
    return row is not None


# --- alerts -------------------------------------------------------------------------


async def alert_metrics(conn: Any, schema: str, window: float, manual_detail: str) -> list[Record]:
    """Per kind: due, oldest_due_seconds, completed and failures (in ``window``)."""
    return list(
        await conn.fetch(sql.statement("alert_metrics", schema), float(window), manual_detail)
    )


async def claim_alert(conn: Any, schema: str, key: str, hold: float) -> bool:
    """True when this caller is to deliver alert ``key`` now (held for ``hold`` seconds)."""
    row = await conn.fetchrow(sql.statement("alert_claim_if_due", schema), key, float(hold))
    return row is not None


async def alert_delivered(conn: Any, schema: str, key: str, cooldown: float) -> None:
    await conn.execute(sql.statement("alert_delivered", schema), key, float(cooldown))


async def alert_failed(conn: Any, schema: str, key: str, error: str) -> None:
    await conn.execute(sql.statement("alert_failed", schema), key, error[:1000])
