"""What a handler sees of its job and its worker."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from venturi import blocking
from venturi.errors import VenturiError
from venturi.priority import Priority

# As child_jobs: ``children`` is the name of ctx.gather's parameter.
from venturi.workflow import children as child_jobs
from venturi.workflow import signals, steps, timers

# Child, the handle of a spawned job, lives with spawn; re-exported where it was.
from venturi.workflow.children import Child as Child
from venturi.workflow.run import WorkflowRun

S = TypeVar("S")
T = TypeVar("T")

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
    # The job's group (SPEC 13); None without one.
    group: str | None = None


class Transactions(Protocol):
    """What a worker gives a context for ``ctx.transaction()`` and ``ctx.complete()``,
    and the run's ``WorkflowRun`` for the workflow primitives
    (``venturi.runtime.transactional.JobTransactions``)."""

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...

    async def complete(self, conn: Any, result: Any = None) -> None: ...

    def workflow(self) -> WorkflowRun:
        """The run as its workflow primitives see it (its records, its connection, its
        spawns not yet written), made on first use."""
        ...

    @property
    def used(self) -> bool:
        """Did the handler use a workflow primitive? Only then have ``flush`` and
        ``release`` anything to do (the worker skips both for a plain job)."""
        ...

    async def flush(self) -> None:
        """The handler returned: write what its primitives left unwritten."""
        ...

    async def release(self) -> None:
        """The handler ended: give back what the primitives held."""
        ...

    def end(self) -> None:
        """The handler ended without using a primitive (``release`` otherwise): any
        primitive called later raises one line instead of reaching a closed pool."""
        ...


class _JobLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds job id, kind and attempt to every record as ``extra`` fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


class RunningJob(Protocol):
    """What a worker's context reads of the run it was made for
    (``venturi.runtime.run.Run``)."""

    cancelling: bool

    def meta(self) -> JobMeta: ...

    def cancel_event(self) -> asyncio.Event: ...


class Context(Generic[S]):
    """Passed to every handler: shared state, job metadata, cancellation and a logger."""

    __slots__ = ("_cancel", "_job", "_log", "_loop", "_run", "_tx", "state")

    def __init__(
        self,
        state: S,
        job: JobMeta,
        cancel: asyncio.Event | None = None,
        transactions: Transactions | None = None,
    ) -> None:
        self.state = state
        self._job: JobMeta | None = job
        self._run: RunningJob | None = None
        self._cancel: asyncio.Event | None = cancel if cancel is not None else asyncio.Event()
        self._log: _JobLogger | None = None
        self._tx = transactions
        # The worker's loop, where it makes its contexts: a sync handler's thread runs
        # its primitives there (venturi.blocking).
        self._loop = blocking.worker_loop()

    @classmethod
    def running(
        cls,
        state: S,
        run: RunningJob,
        transactions: Transactions | None,
        loop: asyncio.AbstractEventLoop,
    ) -> Context[S]:
        """The context a worker makes for a claimed ``run`` on its event loop ``loop``:
        ``job`` and the cancellation event are made from the run when first read (most
        handlers read neither: about a microsecond and a half a job, issue 38)."""
        ctx: Context[S] = cls.__new__(cls)
        ctx.state = state
        ctx._job = None
        ctx._run = run
        ctx._cancel = None
        ctx._log = None
        ctx._tx = transactions
        ctx._loop = loop
        return ctx

    @property
    def job(self) -> JobMeta:
        """The claimed job's ``JobMeta``: id, kind, priority, attempt, failures, when it
        was enqueued, its trace context and its group."""
        job = self._job
        if job is None:
            assert self._run is not None
            job = self._job = self._run.meta()
        return job

    def _cancel_event(self) -> asyncio.Event:
        cancel = self._cancel
        if cancel is None:
            assert self._run is not None
            cancel = self._cancel = self._run.cancel_event()
        return cancel

    def transaction(self) -> Any:
        """``async with ctx.transaction() as conn``: an asyncpg connection of the worker's
        pool in a transaction. Call ``ctx.complete(conn)`` inside it and the job's
        completion commits or rolls back with the handler's own writes. In a sync
        handler, ``with ctx.transaction() as conn``: ``conn`` a
        ``venturi.blocking.BlockingConnection`` (``conn.execute(...)`` returns)."""
        if self._tx is None:
            raise VenturiError("ctx.transaction() needs a context made by a running worker")
        mode = blocking.where(self._loop, "ctx.transaction()")
        if mode == blocking.FOREIGN:
            raise VenturiError(
                "ctx.transaction() was called on an event loop other than its worker's, "
                "where its connection cannot be used: call it from the handler itself"
            )
        if mode == blocking.THREAD:
            assert self._loop is not None
            return blocking.BlockingTransaction(self._tx.transaction(), self._loop)
        inner: AbstractAsyncContextManager[Any] = self._tx.transaction()
        return inner

    def complete(self, conn: Any, result: Any = None) -> Any:
        """Mark the job completed (with ``result``) in the open ``ctx.transaction()``,
        guarded by this run's claim: ``venturi.ClaimLost`` when the claim is gone
        (nothing written; let it propagate so the transaction rolls back). Once the
        block commits, the worker settles nothing more, whatever the handler returns.
        Awaited in an async handler; a blocking call in a sync one."""
        if self._tx is None:
            raise VenturiError("ctx.complete() needs a context made by a running worker")
        tx = self._tx
        raw = conn.raw if isinstance(conn, blocking.BlockingConnection) else conn
        return self._call("ctx.complete()", lambda: tx.complete(raw, result))

    def _call(self, what: str, make: Callable[[], Awaitable[Any]]) -> Any:
        """The coroutine ``make()`` for an async handler to await; in a sync handler's
        thread, its value, once the worker's loop ran it; on another event loop, an
        awaitable of that value (run on the worker's loop all the same)."""
        mode = blocking.where(self._loop, what)
        if mode == blocking.LOOP:
            return make()
        assert self._loop is not None

        async def run() -> Any:
            return await make()

        if mode == blocking.THREAD:
            return blocking.wait(self._loop, run())
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), self._loop))

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
        if self._cancel is None:
            assert self._run is not None
            return self._run.cancelling
        return self._cancel.is_set()

    async def cancelled(self) -> None:
        """Returns when cancellation is requested; race it against work with asyncio.wait."""
        await self._cancel_event().wait()

    # --- workflows (SPEC 12; docs/workflows.md) -------------------------------------

    def _workflow(self, what: str) -> WorkflowRun:
        """The run as its workflow primitives see it, made by the worker on first use."""
        if self._tx is None:
            raise VenturiError(
                f"ctx.{what}() is a workflow primitive: it needs a context made by a worker "
                "(or venturi.testing)"
            )
        return self._tx.workflow()

    def step(
        self, name: str, fn: Callable[..., Any], *args: Any, transactional: bool = False
    ) -> Any:
        """Run ``fn(*args)`` (async, or sync in a thread) once and record its value under
        ``name``; on every later run of the job return the recorded value, decoded as
        ``fn``'s return annotation, without running ``fn``. ``transactional=True`` calls
        ``fn(conn, *args)`` in a transaction that also records the step: its writes
        happen exactly once (a sync ``fn`` gets a ``BlockingConnection``). A name used
        twice in one run is a ``ConfigError``. ``await`` it in an async handler; in a
        sync handler it is a blocking call that returns the value."""
        run = self._workflow("step")
        return self._call("ctx.step()", lambda: steps.step(run, name, fn, args, transactional))

    def step_key(self, name: str) -> str:
        """A stable idempotency key of step ``name``: the same on every run and worker,
        different for any other job or name (for a payment provider's header)."""
        digest = hashlib.sha256(f"venturi step\x1f{self.job.id}\x1f{name}".encode())
        return f"venturi-{self.job.id}-{digest.hexdigest()[:32]}"

    def sleep(self, name: str, duration: timedelta | float) -> Any:
        """A durable timer: the first run records the wake time ``duration`` from now and
        the job waits, holding no slot; runs after it is due return at once."""
        run = self._workflow("sleep")
        return self._call("ctx.sleep()", lambda: timers.sleep_until(run, name, None, duration))

    def sleep_until(self, name: str, at: datetime) -> Any:
        """``sleep`` until the timezone-aware time ``at``."""
        run = self._workflow("sleep_until")
        return self._call("ctx.sleep_until()", lambda: timers.sleep_until(run, name, at))

    def wait_for_signal(
        self,
        name: str,
        type: type[T],
        *,
        timeout: timedelta | float | None = None,
    ) -> Any:
        """The payload of the first signal ``name`` sent to this job (``venturi.signal``),
        decoded as ``type``; until it comes the job waits. After ``timeout`` (from the
        first run that reached this) ``venturi.SignalTimeout``, on every later run too."""
        run = self._workflow("wait_for_signal")
        return self._call(
            "ctx.wait_for_signal()", lambda: signals.wait_for_signal(run, name, type, timeout)
        )

    def spawn(
        self,
        name: str,
        task: Any,
        carry: Any,
        *,
        priority: Priority | None = None,
        key: str | None = None,
        group: str | None = None,
    ) -> Any:
        """Enqueue a child job of ``task`` once (its id is the recorded step ``name``,
        written in the child's own transaction); a ``Child`` for ``gather``. The child
        takes its parent's group unless given ``group`` (SPEC 13)."""
        run = self._workflow("spawn")
        return self._call(
            "ctx.spawn()", lambda: child_jobs.spawn(run, name, task, carry, priority, key, group)
        )

    def gather(self, *children: Child[Any]) -> Any:
        """The children's results (decoded as each task's ``result`` type), in order, once
        all finished; until then the job waits and the last to finish wakes it. A child
        that ended dead or cancelled raises ``venturi.ChildFailed``."""
        run = self._workflow("gather")
        return self._call("ctx.gather()", lambda: child_jobs.gather(run, children))

    def result_of(self, name: str) -> Any:
        """The result of the ``venturi.Workflow`` node ``name`` this job comes after,
        decoded as its task's ``result`` type."""
        run = self._workflow("result_of")
        return self._call("ctx.result_of()", lambda: child_jobs.result_of(run, name))
