"""Statements that keep a connection's failure bounded: a probe, and a transaction's
server-side deadlines."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn


async def connection_probe(conn: Conn) -> bool:
    return bool(await conn.fetchval(sql.statement("connection_probe")))


async def transaction_deadlines(conn: Conn, *, schema: str, deadline: float) -> None:
    """The rest of this transaction: each statement, and any idle spell, ends after
    ``deadline`` seconds on the server."""
    ms = str(max(1, round(deadline * 1000)))
    await conn.execute(sql.statement("transaction_deadlines", schema), ms, ms)
