"""The connection one run's primitives hold: taken from the worker's pool by the run's
first statement and given back when the handler ends. Each statement is then one round
trip, where a pool's acquire and release would add its reset to every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from venturi.db.connect import release


@dataclass
class RunConnection:
    """A connection of ``pool`` for one run. A worker on one shared connection (no pool:
    ``venturi.testing.drain`` on a Connection) runs on that instead."""

    pool: Any
    # The connection (None: not taken yet), and whether it came from ``pool.acquire()``.
    conn: Any = None
    acquired: bool = False
    # A transactional step's function holds the connection in its transaction: a write
    # of the run's own then would run beside the function's statements.
    holding: bool = False

    @property
    def shared(self) -> bool:
        """Does the worker run on one shared connection (no transactions of our own)?"""
        return bool(getattr(self.pool, "shares_one_connection", False))

    async def taken(self) -> Any:
        """The connection, taken on first use."""
        if self.conn is None:
            if self.shared or not hasattr(self.pool, "acquire"):
                self.conn = self.pool
            else:
                self.conn = await self.pool.acquire()
                self.acquired = True
        return self.conn

    def close_now(self) -> None:
        """Close an acquired connection with a statement on the wire: the pool's reset
        would first wait for the server's answer to a cancel request, for ever on a
        frozen network; closing it ends the statement at once (the pool opens another)."""
        if self.acquired:
            self.conn.terminate()

    async def give_back(self) -> None:
        """Give an acquired connection back to the pool (the handler ended), its reset
        bounded: on a black-holed link it would wait for ever, and the run's end with it."""
        conn, acquired = self.conn, self.acquired
        self.conn, self.acquired = None, False
        if acquired:
            await release(self.pool, conn)
