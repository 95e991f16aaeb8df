"""Workflow primitives and transactions for sync handlers (SPEC 12, amended): a ``def``
handler runs in a thread, and every primitive it calls runs on its worker's event loop
while the thread waits for the value, with the same guarantees as in an async handler.

``where`` tells, at the call, where the caller is: on the worker's own loop (an async
handler: hand back the coroutine to await), in a thread with no loop running (a sync
handler: run it on the worker's loop and wait), or on another event loop (an async
function a sync handler runs with ``asyncio.run`` or asgiref: an awaitable of the
worker's loop's result). Where it cannot work (its worker's loop gone, a context no
worker made) it raises one line, at the call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager
from contextvars import copy_context
from types import TracebackType
from typing import Any

from venturi.errors import VenturiError
from venturi.threads import DaemonThreads


def worker_loop() -> asyncio.AbstractEventLoop | None:
    """The loop running in this thread (where a worker makes its contexts), or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# Where a primitive is called from, as ``where`` tells it.
LOOP = "loop"  # the worker's own loop: an async handler awaits the coroutine
THREAD = "thread"  # a sync handler's thread, no loop running: wait for the value
FOREIGN = "foreign"  # another event loop (an async Django task run by asgiref, say)


def where(loop: asyncio.AbstractEventLoop | None, what: str) -> str:
    """``LOOP``, ``THREAD`` or ``FOREIGN`` for a call of ``what`` on a context made on
    ``loop``; a one-line ``VenturiError`` when that loop no longer runs."""
    running = worker_loop()
    if running is not None and (loop is None or running is loop):
        return LOOP
    if loop is None or loop.is_closed() or not loop.is_running():
        raise VenturiError(
            f"{what} needs its worker's event loop running: call it from the handler "
            "while it runs, not after"
        )
    return THREAD if running is None else FOREIGN


def wait(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on ``loop`` and wait for its value in this thread (its exception,
    a wait's ``Suspend`` included, is raised here). On ``loop``'s own thread it would
    wait for itself forever: a one-line ``VenturiError`` instead."""
    if worker_loop() is loop:
        coro.close()
        _refuse_on_loop()
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _refuse_on_loop() -> None:
    raise VenturiError(
        "a blocking call (a sync handler's primitive, a BlockingConnection) was made on "
        "the worker's event loop, where it would wait for itself: await the async form"
    )


# The threads sync step functions run on: not the threads sync handlers run on (the
# worker's, one per slot; asyncio's default executor outside a worker). A handler
# waiting in ctx.step holds its thread; were its step function queued behind it there
# too, handlers filling every thread would each wait for a thread none of them gives back.
STEP_THREADS = 32
_step_threads = DaemonThreads(STEP_THREADS, "venturi-step")  # threads made when first needed


async def in_thread(threads: Executor | None, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a thread of ``threads`` (None: asyncio's default executor), with
    the caller's context variables, as ``asyncio.to_thread``."""
    call = functools.partial(copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(threads, call)


async def in_step_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a thread of the step functions' own pool."""
    return await in_thread(_step_threads, fn, *args)


async def _awaited(value: Any) -> Any:
    return await value


class BlockingConnection:
    """An asyncpg connection for sync code: each of its coroutine methods (``execute``,
    ``fetch``, ``fetchrow``, ``fetchval``, ``executemany`` ...) runs on the worker's
    loop and returns its value; ``raw`` is the asyncpg connection itself."""

    __slots__ = ("_loop", "raw")

    def __init__(self, raw: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.raw = raw
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.raw, name)
        if not callable(attr):
            return attr
        loop = self._loop

        # A pool's connection proxy wraps its methods in plain functions that return
        # coroutines: decide by what a call returns, not by the method.
        def call(*args: Any, **kwargs: Any) -> Any:
            if worker_loop() is loop:
                _refuse_on_loop()
            result = attr(*args, **kwargs)
            if inspect.isawaitable(result):
                return wait(loop, _awaited(result))
            return result

        call.__name__ = name
        return call

    def drive(self, call: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
        """Run ``call(raw)`` on the worker's loop and wait for its value: venturi's own
        blocking calls (``task.enqueue_sync``, ``enqueue_many_sync``, ...) given this
        connection, in its transaction."""
        return wait(self._loop, call(self.raw))

    def __repr__(self) -> str:
        return f"<venturi BlockingConnection over {self.raw!r}>"


class BlockingTransaction:
    """``with ctx.transaction() as conn`` in a sync handler: the async transaction run
    on the worker's loop, its connection a ``BlockingConnection``."""

    __slots__ = ("_inner", "_loop")

    def __init__(
        self, inner: AbstractAsyncContextManager[Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        self._inner = inner
        self._loop = loop

    def __enter__(self) -> BlockingConnection:
        return BlockingConnection(wait(self._loop, self._inner.__aenter__()), self._loop)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return wait(self._loop, self._inner.__aexit__(kind, exc, tb))  # type: ignore[no-any-return]
