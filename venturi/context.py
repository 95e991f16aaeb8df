"""What a handler sees of its job and its worker."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any, Generic, TypeVar

import msgspec

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


class _JobLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds job id, kind and attempt to every record as ``extra`` fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


class Context(Generic[S]):
    """Passed to every handler: shared state, job metadata, cancellation and a logger."""

    __slots__ = ("_cancel", "_log", "job", "state")

    def __init__(self, state: S, job: JobMeta, cancel: asyncio.Event | None = None) -> None:
        self.state = state
        self.job = job
        self._cancel = cancel if cancel is not None else asyncio.Event()
        self._log: _JobLogger | None = None

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
