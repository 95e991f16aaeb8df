"""Statements on kinds: the per-kind queue pause, the kinds the database knows."""

from __future__ import annotations

from collections.abc import Sequence

from venturi import sql
from venturi.db.conn import Conn, Record


async def kind_pause(
    conn: Conn, *, schema: str, kinds: Sequence[str], paused_by: str, reason: str
) -> list[Record]:
    return list(
        await conn.fetch(sql.statement("kind_pause", schema), list(kinds), paused_by, reason)
    )


async def kind_list_known(conn: Conn, *, schema: str, kinds: Sequence[str]) -> set[str]:
    """Those of ``kinds`` that some job or schedule has (the others are probably typos)."""
    rows = await conn.fetch(sql.statement("kind_list_known", schema), list(kinds))
    return {r["kind"] for r in rows}


async def kind_resume(conn: Conn, *, schema: str, kinds: Sequence[str]) -> list[str]:
    rows = await conn.fetch(sql.statement("kind_resume", schema), list(kinds))
    return [str(r["kind"]) for r in rows]


async def kind_paused_list(conn: Conn, *, schema: str) -> list[Record]:
    return list(await conn.fetch(sql.statement("kind_paused_list", schema)))


async def kind_list(conn: Conn, *, schema: str) -> list[Record]:
    """Every kind the database knows (jobs, schedules, workers, pauses), with its pause."""
    return list(await conn.fetch(sql.statement("kind_list", schema)))
