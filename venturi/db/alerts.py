"""Statements of the alerts task: the metrics it checks, and who delivers an alert."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn, Record


async def alert_metrics(
    conn: Conn, *, schema: str, window: float, manual_detail: str
) -> list[Record]:
    """Per kind: due, oldest_due_seconds, completed and failures (in ``window``)."""
    return list(
        await conn.fetch(sql.statement("alert_metrics", schema), float(window), manual_detail)
    )


async def alert_claim_if_due(conn: Conn, *, schema: str, key: str, hold: float) -> bool:
    """True when this caller is to deliver alert ``key`` now (held for ``hold`` seconds)."""
    row = await conn.fetchrow(sql.statement("alert_claim_if_due", schema), key, float(hold))
    return row is not None


async def alert_delivered(conn: Conn, *, schema: str, key: str, cooldown: float) -> None:
    await conn.execute(sql.statement("alert_delivered", schema), key, float(cooldown))


async def alert_failed(conn: Conn, *, schema: str, key: str, error: str) -> None:
    await conn.execute(sql.statement("alert_failed", schema), key, error[:1000])
