"""One connection of a pool, held for a sequence of statements."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from venturi.db.connect import is_pool, release
from venturi.db.errors import TRANSIENT, unusable

# The least time a Held connection gives the pool to open a new connection.
CONNECT_DEADLINE = 10.0

# After a statement outlives its deadline, the next one gets twice as long, up to this
# (or the deadline itself, if longer); a statement that answers restores the deadline.
STRETCHED_DEADLINE = 30.0
# How long a connection cut mid-statement is given to send the server its cancel and
# close (a server that never answers: then the socket is closed alone).
CANCEL_WAIT = 1.0

# What a prepared statement of our own raises once it no longer fits the server's
# state: "cached plan must not change result type" (0A000), "prepared statement does
# not exist" (26000).
_STALE_STATEMENT = (
    asyncpg.exceptions.InvalidCachedStatementError,
    asyncpg.exceptions.FeatureNotSupportedError,
    asyncpg.exceptions.InvalidSQLStatementNameError,
)

# A statement run through ``fetch_planned`` is prepared anew, when its caller asks, once
# its plan is at least this old (see ``fetch_planned``).
REPLAN_AFTER = 10.0


class Held:
    """One connection of a pool, held for the worker loop's sequential statements and
    replaced when it breaks: a pool's acquire and release cost a reset round trip per
    statement. Looks like a pool to the statement functions (a ``Source``).

    ``deadline`` bounds each statement (and each ``acquire`` block) in seconds: past it
    the statement raises ``TimeoutError`` and its connection is closed, so a connection
    that stays open while nothing answers (a black-holed network, a frozen pooler) costs
    one deadline, not the worker. The next statement, on a new connection, gets twice
    the time (up to ``STRETCHED_DEADLINE``): on a slow network a new connection's first
    statements cost a prepare round trip each, and a fixed deadline would cut every one
    of them for as long as the network stays slow. With ``keep=False`` the connection
    goes back to the pool after each statement (the heartbeat shares the pool).

    ``prepare=False`` for a pool without a statement cache (behind a transaction pooler,
    where a named prepared statement would not survive the transaction): there
    ``fetch_planned`` is a plain ``fetch``."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        deadline: float | None = None,
        *,
        keep: bool = True,
        prepare: bool = True,
    ) -> None:
        self.pool = pool
        self.deadline = deadline
        self._now = deadline  # this statement's deadline: stretched after a timeout
        # Opening a connection is several round trips (TLS negotiation, startup, auth):
        # on a slow network it takes longer than one statement, and under the statement's
        # deadline a worker whose connections were cut could never open a new one.
        self.connect_deadline = None if deadline is None else max(deadline, CONNECT_DEADLINE)
        self.keep = keep
        self.prepare = prepare and keep
        self.conn: Any = None
        # fetch_planned's statements on this connection: query -> (statement, prepared at).
        self._plans: dict[str, tuple[Any, float]] = {}

    async def _get(self) -> Any:
        if self.conn is not None:
            try:
                broken = self.conn.is_closed()
            except asyncpg.InterfaceError:
                # The pool took it back itself (its backend died): nothing to release.
                self.conn, broken = None, False
            if broken:
                await self._drop()
        if self.conn is None:
            async with asyncio.timeout(self.connect_deadline):
                self.conn = await self.pool.acquire()
        return self.conn

    async def _drop(self, exc: BaseException | None = None) -> None:
        conn, self.conn = self.conn, None
        self._plans.clear()
        if conn is not None and isinstance(exc, (TimeoutError, asyncio.CancelledError)):
            # Cut mid-statement: the server may never answer, and a reset would wait for
            # it. Close the connection, which sends the server the cancel request asyncpg
            # began as the wait was cut (a bare terminate dropped it, and a statement
            # waiting on a lock ran on: a claim then committed after the worker had given
            # it up, its job claimed and run by no one until its lease ended), at most
            # CANCEL_WAIT; then the socket. The pool opens a new connection.
            task = asyncio.current_task()
            cancels = 0 if task is None else task.cancelling()
            try:
                await conn.close(timeout=CANCEL_WAIT)  # a pool's: handed back, closed
            except (Exception, asyncio.CancelledError) as failed:
                with contextlib.suppress(Exception):
                    conn.terminate()
                cancelled = task is not None and task.cancelling() > cancels
                if isinstance(failed, asyncio.CancelledError) and cancelled:
                    raise  # this task was cancelled meanwhile, not just the close's wait
        if conn is not None:
            # The pool replaces a broken connection; a healthy one it resets (bounded:
            # not under the statement's deadline, whose cancel would leave the pool's
            # shielded release running unobserved).
            with contextlib.suppress(*TRANSIENT):
                await release(self.pool, conn)

    def _answered(self) -> None:
        self._now = self.deadline

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, TimeoutError) and self._now is not None and self.deadline is not None:
            self._now = min(self._now * 2, max(self.deadline, STRETCHED_DEADLINE))

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            conn = await self._get()
            async with asyncio.timeout(self._now):
                answer = await getattr(conn, method)(*args, **kwargs)
        except BaseException as exc:
            self._failed(exc)
            if unusable(exc):
                await self._drop(exc)
            raise
        self._answered()
        if not self.keep:
            await self._drop()
        return answer

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("fetch", *args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("fetchrow", *args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("fetchval", *args, **kwargs)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("execute", *args, **kwargs)

    async def fetch_planned(self, *args: Any, replan: bool = False) -> Any:
        """``fetch`` through a prepared statement this Held keeps for its connection;
        with ``replan``, prepared anew first if its plan is ``REPLAN_AFTER`` old.

        PostgreSQL keeps a prepared statement's generic plan, made once from the table's
        size and statistics at the time, for the statement's life (until an ANALYZE or
        VACUUM of the table invalidates it). A plan made while the queue was empty (a
        sequential scan is then the cheapest) stays when a backlog arrives and costs
        O(backlog) per statement, where an index scan costs O(1); on a server whose
        autovacuum is off nothing would invalidate it. The claim loop asks for a replan
        when a claim came back full (a backlog): at most once per ``REPLAN_AFTER``, the
        next five executions are planned each time and the sixth makes the generic plan
        from the table as it is. asyncpg's own cache gives no way to drop one statement,
        hence a statement of our own."""
        if not self.prepare:
            return await self.fetch(*args)
        # What ``acquire`` does around a block, written out: its generator-based
        # context manager cost a generator and two frames more per claim (issue 38).
        # ``prepare`` implies ``keep``: the connection stays held.
        try:
            conn = await self._get()
            async with asyncio.timeout(self._now):
                answer = await self._run_planned(conn, replan, *args)
        except BaseException as exc:
            self._failed(exc)
            if unusable(exc):
                await self._drop(exc)
            raise
        self._answered()
        return answer

    async def _run_planned(self, conn: Any, replan: bool, *args: Any) -> Any:
        # A pass-through like fetch: args are (query, *parameters).
        query, parameters = args[0], args[1:]
        held = self._plans.get(query)
        if held is None or (replan and time.monotonic() - held[1] >= REPLAN_AFTER):
            held = await self._prepare(conn, query)
        try:
            return await held[0].fetch(*parameters)
        except _STALE_STATEMENT:
            # The statement is gone (DEALLOCATE) or its result type changed under it (a
            # schema change): asyncpg retries its own cache's statements, not ours.
            # Prepare it again, once.
            held = await self._prepare(conn, query)
            return await held[0].fetch(*parameters)

    async def _prepare(self, conn: Any, *query: str) -> tuple[Any, float]:
        # The statement it replaces is closed by asyncpg once unreferenced.
        held = (await conn.prepare(*query), time.monotonic())
        self._plans[query[0]] = held
        return held

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """The held connection, for a transaction (a shared-rate claim, the heartbeat's
        tick); the deadline bounds the whole block."""
        try:
            conn = await self._get()
            async with asyncio.timeout(self._now):
                yield conn
        except BaseException as exc:
            self._failed(exc)
            if unusable(exc):
                await self._drop(exc)
            raise
        self._answered()
        if not self.keep:
            await self._drop()

    async def close(self) -> None:
        await self._drop()


def hold(
    pool: Any, deadline: float | None = None, *, keep: bool = True, prepare: bool = True
) -> Any:
    """A ``Held`` connection of an asyncpg Pool; any other source as it is (a look-alike
    that forwards statements, as ``venturi.testing.drain`` passes)."""
    return Held(pool, deadline, keep=keep, prepare=prepare) if is_pool(pool) else pool


def fetch_planned(conn: Any, *, replan: bool = False) -> Any:
    """How a claim runs its statement on ``conn``: through ``Held.fetch_planned`` on the
    worker loop's held connection (its generic plan kept, made anew with ``replan``),
    ``fetch`` on any other (a transaction's connection, a look-alike)."""
    if isinstance(conn, Held):
        return functools.partial(conn.fetch_planned, replan=replan)
    return conn.fetch
