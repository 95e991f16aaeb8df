"""What a handler sees of its job and its worker."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from venturi.errors import VenturiError
from venturi.priority import Priority

S = TypeVar("S")

_log = logging.getLogger("venturi.job")


class JobMeta(msgspec.Struct, frozen=True):
    """The claimed job's identity and counters; ``traceparent``: the W3C trace context
    its enqueue ran in (OpenTelemetry), if any."""

    id: int
    kind: str
    priority: Priority
    attempt: int
    failures: int
    created_at: datetime
    traceparent: str | None = None


class Transactions(Protocol):
    """What a worker gives a context for ``ctx.transaction()`` and ``ctx.complete()``
    (``venturi.runtime.transactional.JobTransactions``)."""

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...

    async def complete(self, conn: Any, result: Any = None) -> None: ...


class _JobLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds job id, kind and attempt to every record as ``extra`` fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


class Context(Generic[S]):
    """Passed to every handler: shared state, job metadata, cancellation and a logger."""

    __slots__ = ("_cancel", "_log", "_tx", "job", "state")

    def __init__(
        self,
        state: S,
        job: JobMeta,
        cancel: asyncio.Event | None = None,
        transactions: Transactions | None = None,
    ) -> None:
        self.state = state
        self.job = job
        self._cancel = cancel if cancel is not None else asyncio.Event()
        self._log: _JobLogger | None = None
        self._tx = transactions

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """``async with ctx.transaction() as conn``: an asyncpg connection of the worker's
        pool in a transaction. Call ``ctx.complete(conn)`` inside it and the job's
        completion commits or rolls back with the handler's own writes."""
        if self._tx is None:
            raise VenturiError("ctx.transaction() needs a context made by a running worker")
        return self._tx.transaction()

    async def complete(self, conn: Any, result: Any = None) -> None:
        """Mark the job completed (with ``result``) in the open ``ctx.transaction()``,
        guarded by this run's claim: ``venturi.ClaimLost`` when the claim is gone
        (nothing written; let it propagate so the transaction rolls back). Once the
        block commits, the worker settles nothing more, whatever the handler returns."""
        if self._tx is None:
            raise VenturiError("ctx.complete() needs a context made by a running worker")
        await self._tx.complete(conn, result)

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry job_id, kind and attempt (made on first use)."""
        if self._log is None:
            job = self.job
            extra = {"job_id": job.id, "kind": job.kind, "attempt": job.attempt}
            self._log = _JobLogger(_log, extra)
        return self._log

    def is_cancelled(self) -> bool:
        """True once the worker asks handlers to stop at a safe point (shutdown)."""
        return self._cancel.is_set()

    async def cancelled(self) -> None:
        """Returns when cancellation is requested; race it against work with asyncio.wait."""
        await self._cancel.wait()
