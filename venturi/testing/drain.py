"""``drain``: run the due jobs of some tasks to settlement in this process, for an
application's tests; and the pool look-alikes its worker runs on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

import asyncpg

from venturi import db
from venturi.errors import ConfigError
from venturi.jobs import get_job
from venturi.runtime.config import check_tasks
from venturi.runtime.worker import Worker
from venturi.sql import DEFAULT_SCHEMA

if TYPE_CHECKING:
    from venturi.jobs import JobInfo
    from venturi.tasks import Task


# A pending job due within this many seconds still counts as due, so the drain waits
# for it: a retry with a test's short backoff (``Backoff.fixed(0.05)``) runs again. The
# default backoff's first retry waits half a second or more, and is left pending.
DUE_SOON = 0.25


class _SharedConnection:
    """One asyncpg Connection made to look like a pool for a draining worker: its
    statements take turns on the connection (the worker's loop and heartbeat run
    concurrently), and LISTEN goes through the same lock."""

    # Handlers cannot have a connection of their own (ctx.transaction()): there is one.
    shares_one_connection = True

    def __init__(self, conn: asyncpg.Connection, schema: str = DEFAULT_SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        self.lock = asyncio.Lock()

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetchval(*args, **kwargs)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.execute(*args, **kwargs)

    def acquire(self) -> _Acquire:
        # Awaited (the LISTEN connection) or entered (each heartbeat tick), as asyncpg's
        # Pool.acquire is: the heartbeat's ``async with`` failed on a coroutine.
        return _Acquire(self)

    # asyncpg's Pool.release signature, hence the timeout parameter.
    async def release(self, conn: _ListenOn, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        conn.unhook()


class _Acquire:
    """``_SharedConnection.acquire()``: awaitable and an async context manager."""

    def __init__(self, shared: _SharedConnection) -> None:
        self.shared = shared
        self.held: _ListenOn | None = None

    def __await__(self) -> Generator[Any, None, _ListenOn]:
        return self._take().__await__()

    async def _take(self) -> _ListenOn:
        return _ListenOn(self.shared)

    async def __aenter__(self) -> _ListenOn:
        self.held = _ListenOn(self.shared)
        return self.held

    async def __aexit__(self, *exc: object) -> None:
        if self.held is not None:
            self.held.unhook()


class _ListenOn:
    """What the worker "acquires" from a ``_SharedConnection``: its LISTEN, the
    heartbeat's tick and the LISTEN health check, every statement taking its turn."""

    def __init__(self, shared: _SharedConnection) -> None:
        self.shared = shared
        self.on_close: list[Callable[..., Any]] = []
        # Inside transaction(): this one holds the connection's turn, so its statements
        # run on it directly (the lock is not reentrant).
        self.holding = False

    def _on(self) -> Any:
        return self.shared.conn if self.holding else self.shared

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        return await self._on().fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        return await self._on().fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        return await self._on().fetchval(*args, **kwargs)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return await self._on().execute(*args, **kwargs)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_ListenOn]:
        """A transaction on the shared connection (a savepoint in the caller's open one),
        as a claim with a global cap or a shared rate takes: it holds the connection's
        turn from start to end, so no other statement of the worker's (a settlement, the
        heartbeat) lands inside it and rolls back with it. Inside the caller's open
        transaction, the deadlines the claim sets for its own (``set_config``'s local)
        would last to the caller's end, and cut its next idle spell: they are set back."""
        conn, schema = self.shared.conn, self.shared.schema
        async with self.shared.lock:
            self.holding = True
            try:
                saved = None
                if conn.is_in_transaction():
                    saved = await db.health.deadlines_now(conn, schema=schema)
                async with conn.transaction():
                    yield self
                if saved is not None:
                    await db.health.deadlines_back(conn, schema=schema, deadlines=saved)
            finally:
                self.holding = False

    async def add_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        async with self.shared.lock:
            await self.shared.conn.add_listener(channel, callback)

    async def remove_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        async with self.shared.lock:
            await self.shared.conn.remove_listener(channel, callback)

    def add_termination_listener(self, callback: Callable[..., Any]) -> None:
        self.shared.conn.add_termination_listener(callback)
        self.on_close.append(callback)

    def unhook(self) -> None:
        for callback in self.on_close:
            self.shared.conn.remove_termination_listener(callback)
        self.on_close.clear()


class _Observed:
    """The pool the draining worker gets: forwards every statement and, as each one ends,
    sets ``activity``, so ``drain`` looks at what is left right after the worker acted
    instead of on a timer."""

    def __init__(self, inner: Any, activity: asyncio.Event) -> None:
        self.inner = inner
        self.activity = activity
        self.shares_one_connection = getattr(inner, "shares_one_connection", False)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetch(*args, **kwargs)
        finally:
            self.activity.set()

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetchrow(*args, **kwargs)
        finally:
            self.activity.set()

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetchval(*args, **kwargs)
        finally:
            self.activity.set()

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.execute(*args, **kwargs)
        finally:
            self.activity.set()

    def acquire(self) -> Any:
        return self.inner.acquire()

    async def release(self, conn: Any, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        return await self.inner.release(conn, timeout=timeout)


async def _source(target: Any, schema: str) -> tuple[Any, Any]:
    """The pool drain opened itself (None when given one) and what the worker uses."""
    if isinstance(target, str):
        own_pool = await db.connect.create_pool(target, min_size=1, max_size=3)
        return own_pool, own_pool
    if isinstance(target, asyncpg.Connection):
        return None, _SharedConnection(target, schema)
    if isinstance(target, asyncpg.Pool):
        return None, target
    raise ConfigError(f"drain: target must be a DSN, an asyncpg Pool or Connection, got {target!r}")


async def _run_while_due(
    worker: Worker[Any],
    remaining: Callable[[], Awaitable[int]],
    activity: asyncio.Event,
    give_up_after: float,
) -> int:
    """Run ``worker`` until no job is due (or it stopped, or ``give_up_after`` passed),
    counting again after each burst of its activity; the jobs still due."""
    shutdown = asyncio.Event()
    running = asyncio.create_task(worker.run(shutdown))
    deadline = asyncio.get_running_loop().time() + give_up_after
    left = -1
    try:
        while True:
            activity.clear()
            left = await remaining()
            if left == 0 or running.done():
                break
            waiter = asyncio.create_task(activity.wait())
            budget = deadline - asyncio.get_running_loop().time()
            await asyncio.wait(
                {waiter, running}, timeout=max(budget, 0), return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            if budget <= 0:
                break
    finally:
        shutdown.set()
        await running  # re-raises what stopped the worker early (SchemaError, ...)
    return left


async def drain(
    target: str | asyncpg.Connection | asyncpg.Pool,
    tasks: Iterable[Task[Any]],
    state: Any = None,
    *,
    schema: str = DEFAULT_SCHEMA,
    give_up_after: float = 60.0,
    concurrency: int = 1,
    timers: bool = True,
    **worker_options: Any,
) -> dict[int, JobInfo]:
    """Run every due job of ``tasks``' kinds to settlement in this process, then stop;
    returns each job the run claimed, as it stands afterwards, by id.

    ``target`` is a DSN, an asyncpg Pool or a Connection (the jobs the connection's open
    transaction enqueued are visible then; handlers must not use that connection). Jobs
    that become due during the run (a pause without delay, a job a handler enqueued, a
    retry due within ``DUE_SOON``, a quarter of a second) run too; a job whose retry
    waits longer is left pending and reported with its failure. Workflows run end to end, children included; with
    ``timers`` (the default), once nothing else is due, a workflow waiting on a timer (a
    sleep, a signal's timeout) is woken at once instead of at its time, its replayed
    sleep returning (send signals before draining: one waited for without a timeout
    leaves the job waiting). ``TimeoutError`` if due work remains after
    ``give_up_after`` seconds (a paused kind or group, a job that pauses forever).
    ``worker_options`` go to ``venturi.Worker`` (``failures_to_dead=True`` makes an
    exception settle dead).
    """
    task_list = check_tasks(tasks, "drain: tasks")
    if not task_list:
        raise ConfigError("drain: give the tasks whose jobs to run")
    kinds = sorted({t.kind for t in task_list})
    identity = f"venturi.testing.drain:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    activity = asyncio.Event()
    own_pool, inner = await _source(target, schema)
    try:

        async def remaining() -> int:
            # Read around the observer: drain's own reads must not count as activity.
            left = await db.reads.job_due_count(
                inner, schema=schema, kinds=kinds, claimed_by=identity, horizon=DUE_SOON
            )
            if left == 0 and timers:
                # Nothing due but workflows asleep: in a test, their time has come.
                left = await db.workflow.job_wake_timers_now(inner, schema=schema, kinds=kinds)
            return left

        await db.schema.schema_version(inner, schema=schema)
        if await remaining() == 0:
            return {}
        options = {"concurrency": concurrency, "poll_max": 1.0, **worker_options}
        worker = Worker(
            state,
            _Observed(inner, activity),
            task_list,
            claimed_by=identity,
            schema=schema,
            **options,
        )
        left = await _run_while_due(worker, remaining, activity, give_up_after)
        if left:
            raise TimeoutError(
                f"drain: {left} job(s) of {', '.join(kinds)} still due after {give_up_after:g}s "
                "(a paused kind or group? a job that pauses forever?)"
            )
        ids = [
            r["id"]
            for r in await db.reads.job_list_claimed_by(inner, schema=schema, claimed_by=identity)
        ]
        out: dict[int, JobInfo] = {}
        for job_id in ids:
            job = await get_job(inner, job_id, schema=schema)
            if job is not None:
                out[job_id] = job
        return out
    finally:
        if own_pool is not None:
            await own_pool.close()
