"""The threads sync handlers and sync step functions run on: a pool of daemon threads.

A thread cannot be stopped. A sync handler that runs past its timeout, or past its
worker's ``shutdown_timeout``, has its job settled or released and runs on in its thread.
``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits,
even after ``shutdown(wait=False)``: a `venturi worker` whose handler was stuck in a
blocking call said it had stopped, and its process never exited, not even on a second
signal. Daemon threads are not joined: the process exits, and the stuck call with it (its
job was already released, as the worker's shutdown promises).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreads(Executor):
    """Up to ``size`` daemon threads, made only when no thread is idle (as
    ThreadPoolExecutor makes its own), named ``name_N``."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._numbers = itertools.count()
        self._closed = False
        self._start()

    def _start(self) -> None:
        # A forked child has none of its parent's threads: it starts with none of its own.
        self._pid = os.getpid()
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        if self._pid != os.getpid():
            self._start()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}_{next(self._numbers)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        return future

    def _serve(self) -> None:
        while (work := self._work.get()) is not None:
            future, fn, args, kwargs = work
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the caller's to see, as ThreadPoolExecutor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            # Hold nothing of the last call while idle (its arguments, its result).
            del work, future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new calls; the idle threads end. ``wait``: join every thread (a call still
        running is waited for); ``cancel_futures``: calls not started are cancelled."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    work = self._work.get_nowait()
                except queue.Empty:
                    break
                if work is not None:
                    work[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for thread in threads:
                thread.join()
