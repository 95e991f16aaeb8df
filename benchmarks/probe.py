"""The no-op job every system runs, and the probe its handler reports to.

Every job is a no-op whose payload is an integer ``i``; the handler only calls
``report(i)``. In a worker subprocess (``benchmarks.worker_proc``) the probe is a
``Probe``, which counts the jobs and timestamps them; elsewhere the report goes nowhere.
A workflow's first step calls ``begin()`` (``benchmarks.scenarios.workflows`` times a
workflow from it, since its report comes only when it finished).

This module sits at the bottom of ``benchmarks/``: the system adapters import it and
nothing else of the harness, so no adapter imports its caller back.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
import time
from collections.abc import Callable

# The kind (or task, entrypoint, workflow name) of the no-op job in every system.
KIND = "bench_noop"

# What the sinks return is dropped (``hand_over``'s return asyncio handles), hence object.
_report: Callable[[int], object] = lambda _i: None  # noqa: E731
_begin: Callable[[], object] = lambda: None  # noqa: E731


def install(
    report_to: Callable[[int], object], begin_to: Callable[[], object] = lambda: None
) -> None:
    """Send the handlers' reports (and workflows' begins) to these from now on."""
    global _report, _begin
    _report, _begin = report_to, begin_to


def report(i: int) -> None:
    """Job ``i``'s handler has started (or, for a workflow, its last code has run)."""
    _report(i)


def begin() -> None:
    """Work has begun (a workflow's first step started); the probe keeps the first."""
    _begin()


def hand_over(loop: asyncio.AbstractEventLoop) -> None:
    """From now on, reports made on another thread (DBOS runs async workflows on an event
    loop of its own thread) reach the probe on ``loop``, the worker's, a few microseconds
    later."""
    report_to, begin_to = _report, _begin
    install(
        lambda i: loop.call_soon_threadsafe(report_to, i),
        lambda: loop.call_soon_threadsafe(begin_to),
    )


def cpu_seconds() -> float:
    """User and system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_kb() -> int:
    """Peak RSS of this process image in KiB.

    Linux's VmHWM belongs to the address space, which exec replaces; ``ru_maxrss`` does
    not: it keeps the parent's peak from before the fork, so a worker started by a
    harness that has grown would report the harness's size.
    """
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Probe:
    """Counts the reports of one worker process and keeps the instants that matter: the
    first report, the ``target``-th (which sets ``stop``) and the last."""

    def __init__(self, target: int, stop: asyncio.Event, echo: bool) -> None:
        self.target = target
        self.stop = stop
        self.echo = echo  # latency mode: each report as a line "J <i> <monotonic>"
        self.count = 0
        self.t_begin: float | None = None
        self.t_first: float | None = None
        self.t_target: float | None = None
        self.t_last: float | None = None
        # CPU seconds of this process at the first and at the target-th job, so that the
        # CPU cost per job leaves out imports and start-up.
        self.cpu_first = 0.0
        self.cpu_target = 0.0

    def begin(self) -> None:
        if self.t_begin is None:
            self.t_begin = time.monotonic()

    def __call__(self, i: int) -> None:
        now = time.monotonic()
        self.count += 1
        self.t_last = now
        if self.t_first is None:
            self.t_first = now
            self.cpu_first = cpu_seconds()
        if self.echo:
            sys.stdout.write(f"J {i} {now!r}\n")
            sys.stdout.flush()
        if self.count == self.target:
            self.t_target = now
            self.cpu_target = cpu_seconds()
            self.stop.set()
