"""Statements that keep a connection's failure bounded: a probe, and a transaction's
server-side deadlines."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn


async def connection_probe(conn: Conn) -> bool:
    return bool(await conn.fetchval(sql.statement("connection_probe")))


async def transaction_deadlines(
    conn: Conn, *, schema: str, statement_ms: int, idle_ms: int
) -> None:
    await conn.execute(
        sql.statement("transaction_deadlines", schema), str(statement_ms), str(idle_ms)
    )
