"""venturi.threads.DaemonThreads: the pool sync handlers and sync steps run on."""

from __future__ import annotations

import os
import threading
from concurrent.futures import CancelledError

import pytest

from venturi.threads import DaemonThreads


def test_threads_are_daemons_made_only_when_none_is_idle() -> None:
    pool = DaemonThreads(4, "t")
    try:
        names = [pool.submit(lambda: threading.current_thread()).result() for _ in range(20)]
        # One call at a time: the one thread, idle again, takes every call.
        assert len({t.name for t in names}) == 1 and all(t.daemon for t in names)
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result()
    finally:
        pool.shutdown()


def test_at_most_size_threads_run_and_the_rest_queue() -> None:
    pool = DaemonThreads(2, "t")
    gate, started = threading.Event(), threading.Semaphore(0)

    def held() -> str:
        started.release()
        gate.wait()
        return threading.current_thread().name

    futures = [pool.submit(held) for _ in range(3)]
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    assert not started.acquire(timeout=0.05)  # the third waits for a thread
    gate.set()
    assert len({f.result(timeout=10) for f in futures}) == 2
    pool.shutdown()


def test_shutdown_cancels_calls_not_started_and_refuses_new_ones() -> None:
    pool = DaemonThreads(1, "t")
    gate = threading.Event()
    running = pool.submit(gate.wait)
    queued = pool.submit(lambda: "never")
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert running.result(timeout=10) is True
    with pytest.raises(CancelledError):
        queued.result(timeout=10)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(lambda: None)


# Python 3.12 warns of any fork of a process with threads: this one is the subject.
@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_a_forked_child_makes_threads_of_its_own() -> None:
    pool = DaemonThreads(1, "t")
    assert pool.submit(lambda: 1).result(timeout=10) == 1  # the parent's thread, now idle
    pid = os.fork()
    if pid == 0:  # the child: the parent's idle thread is not here
        try:
            os._exit(0 if pool.submit(lambda: 2).result(timeout=10) == 2 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    pool.shutdown()
    assert os.waitstatus_to_exitcode(status) == 0
