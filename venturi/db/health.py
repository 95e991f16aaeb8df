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


async def deadlines_now(conn: Conn, *, schema: str) -> tuple[str, str]:
    """This transaction's statement and idle deadlines, as ``deadlines_back`` takes them."""
    row = await conn.fetchrow(sql.statement("transaction_deadlines_now", schema))
    assert row is not None  # it reads two settings, no table: always one row
    return str(row["statement_timeout"]), str(row["idle_timeout"])


async def deadlines_back(conn: Conn, *, schema: str, deadlines: tuple[str, str]) -> None:
    """Set this transaction's deadlines back to ``deadlines`` (``deadlines_now``'s)."""
    await conn.execute(sql.statement("transaction_deadlines", schema), *deadlines)
