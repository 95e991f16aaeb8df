"""Completion inside the handler's own transaction: ``ctx.transaction()`` and
``ctx.complete(conn)``, so a handler's writes and its job's completion commit or roll
back together."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from venturi import db
from venturi.codecs import encode_any
from venturi.errors import ClaimLost, VenturiError
from venturi.runtime.run import Run
from venturi.workflow.run import WorkflowRun

log = logging.getLogger("venturi.worker")


class JobTransactions:
    """``ctx.transaction()`` and ``ctx.complete()`` of one run: a connection of the
    worker's pool in a transaction, and the completion written on it under this run's
    claim token. Once a block with a completion commits, the run is ``committed`` and the
    worker writes no settlement of its own."""

    __slots__ = ("_done", "_ended", "_open", "_run", "claimant", "pool", "run", "schema", "used")

    def __init__(self, pool: Any, schema: str, claimant: db.Claimant, run: Run) -> None:
        self.pool = pool
        self.schema = schema
        self.claimant = claimant
        self.run = run
        self._open: Any = None
        self._done = False
        self._run: WorkflowRun | None = None
        self._ended = False  # the handler returned: nothing more runs on its behalf
        # The handler used a workflow primitive: ``flush`` and ``release`` have work. An
        # attribute, not a property: read twice per job (issue 38).
        self.used = False

    def workflow(self) -> WorkflowRun:
        """The run as its workflow primitives see it, made on first use: a plain job
        reads nothing extra. A sync handler's context runs the primitives on the
        worker's loop (``venturi.blocking``)."""
        self._check_running("a workflow primitive")
        if self._run is None:
            run = self.run
            self._run = WorkflowRun(self.pool, self.schema, run.id, holds=run.holds_claim)
            self.used = True
        return self._run

    async def flush(self) -> None:
        """Write the spawns the handler made and has not written yet (it returned)."""
        if self._run is not None:
            await self._run.spawns.flush()

    async def release(self) -> None:
        """The handler ended: give back what its workflow primitives held. A connection
        that broke meanwhile (a backend kill, a restart) raises as the pool resets it;
        the pool has closed it then, and the run's outcome stands: a failure here would
        replace a decided wait or a completion."""
        self._ended = True
        if self._run is not None:
            try:
                await self._run.release()
            # TRANSIENT: the reset of a killed backend's connection may also raise
            # asyncpg's InternalClientError.
            except db.errors.TRANSIENT as exc:
                log.warning(
                    "job %d: the connection of its workflow steps broke before it was given "
                    "back (%s); the run's outcome stands",
                    self.run.id,
                    db.errors.one_line(exc),
                    extra=self.run.log_extra(),
                )

    def end(self) -> None:
        self._ended = True

    def _check_running(self, what: str) -> None:
        if self._ended:
            raise VenturiError(
                f"job {self.run.id}: {what} was called after its run ended: call it while "
                "the handler runs (a thread the handler started must finish before it returns)"
            )

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        self._check_running("ctx.transaction()")
        if self._open is not None:
            raise VenturiError("ctx.transaction() is already open: nest conn.transaction()")
        if getattr(self.pool, "shares_one_connection", False):
            raise VenturiError(
                "ctx.transaction() needs a pool: this worker runs on one shared connection "
                "(venturi.testing.drain on a Connection); give it a DSN or a Pool"
            )
        # The children spawned before commit before it: a completion in this block
        # must not settle a parent whose spawns are not written.
        await self.flush()
        if not db.connect.is_pool(self.pool):  # a look-alike: its own acquire and release
            async with db.connect.pooled(self.pool) as conn, self._block(conn) as yielded:
                yield yielded
            return
        conn = await self.pool.acquire()
        try:
            async with self._block(conn) as yielded:
                yield yielded
        except BaseException:
            # Its error, not the release's: a broken connection the pool closes anyway.
            with contextlib.suppress(*db.errors.TRANSIENT):
                await db.connect.release(self.pool, conn)
            raise
        try:
            await db.connect.release(self.pool, conn)
        except db.errors.TRANSIENT as exc:
            # The block committed, then its connection broke before the pool's reset (a
            # backend killed in between): the block stands. Raised, it failed a run whose
            # completion had committed ("no longer holds its claim") or whose writes had,
            # which its retry then wrote again.
            log.warning(
                "job %d: the connection of its committed ctx.transaction() block broke "
                "before it was given back (%s); the block stands",
                self.run.id,
                db.errors.one_line(exc),
                extra=self.run.log_extra(),
            )

    @contextlib.asynccontextmanager
    async def _block(self, conn: Any) -> AsyncIterator[Any]:
        """The transaction of a ``ctx.transaction()`` block on ``conn``; the run is
        ``committed`` as soon as a block with a completion has."""
        completed = False
        async with conn.transaction():
            self._open, self._done = conn, False
            try:
                yield conn
            finally:
                completed, self._open, self._done = self._done, None, False
        # Reached only once the transaction committed: the completion is durable.
        if completed:
            self.run.committed = True

    async def complete(self, conn: Any, result: Any = None) -> None:
        run = self.run
        if self._open is None or conn is not self._open:
            raise VenturiError(
                "ctx.complete(conn) takes the connection of the open ctx.transaction() block"
            )
        if self._done:
            return
        settled = await db.settle.job_complete_many_if_owned(
            conn,
            schema=self.schema,
            claimant=self.claimant,
            ids=[run.id],
            attempts=[run.attempt],
            results=[None if result is None else encode_any(result, "result")],
        )
        if run.id not in settled:
            raise ClaimLost(run.id)
        self._done = True
