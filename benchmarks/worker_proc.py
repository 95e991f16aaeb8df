"""One worker of one system in its own process: ``python -m benchmarks.worker_proc SPEC``.

SPEC is a JSON object: ``system``, ``dsn``, ``cfg`` (the system's worker configuration),
``mode`` (``drain`` or ``latency``), ``target`` (drain: stop after this many jobs),
``loop`` (``uvloop`` or ``asyncio``) and ``timeout`` (seconds: the worker stops then even
if it has not seen ``target`` jobs, and reports what it saw).

The process reports on stdout, one line each:
- ``ready`` once the worker has been running for ``settle`` seconds (latency mode);
- ``J <i> <monotonic>`` when the handler of job ``i`` starts (latency mode only);
- a final JSON object: jobs seen, the monotonic instants of the first, the
  ``target``-th and the last job (and of the first ``systems.begin()``, if any), CPU seconds and peak RSS (VmHWM) of this process.

``time.monotonic`` is CLOCK_MONOTONIC on Linux, shared by every process of the machine,
so the harness can compare its own instants with the worker's. In latency mode, closing
stdin stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import sys
import threading
import time
from typing import Any

from benchmarks import systems


class Probe:
    def __init__(self, target: int, stop: asyncio.Event, echo: bool) -> None:
        self.target = target
        self.stop = stop
        self.echo = echo
        self.count = 0
        # The first instant any work began (a workflow's first step): benchmarks.workflows
        # times from it, since a workflow's first report comes only when it finished.
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
            self.cpu_first = _cpu()
        if self.echo:
            sys.stdout.write(f"J {i} {now!r}\n")
            sys.stdout.flush()
        if self.count == self.target:
            self.t_target = now
            self.cpu_target = _cpu()
            self.stop.set()


def _peak_rss_kb() -> int:
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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    with contextlib.suppress(Exception):
        sys.stdin.read()
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(stop.set)


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    stop = asyncio.Event()
    latency = spec["mode"] == "latency"
    probe = Probe(spec.get("target") or 0, stop, echo=latency)
    systems.set_probe(probe)
    systems.set_begin(probe.begin)
    loop = asyncio.get_running_loop()
    if latency:
        threading.Thread(target=_watch_stdin, args=(loop, stop), daemon=True).start()
    loop.call_later(spec.get("timeout", 600), stop.set)
    started = time.monotonic()
    run = asyncio.create_task(systems.WORKERS[spec["system"]](spec["dsn"], spec["cfg"], stop))
    if latency:
        await asyncio.wait([run], timeout=spec.get("settle", 1.0))
        if run.done():
            run.result()  # a worker that died at start: raise its error
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    await run
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "count": probe.count,
        "t_start": started,
        "t_begin": probe.t_begin,
        "t_first": probe.t_first,
        "t_target": probe.t_target,
        "t_last": probe.t_last,
        "t_exit": time.monotonic(),
        "cpu_window": probe.cpu_target - probe.cpu_first if probe.t_target else None,
        "cpu_user": usage.ru_utime,
        "cpu_sys": usage.ru_stime,
        "maxrss_kb": _peak_rss_kb(),
    }


def run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("loop", "uvloop") == "uvloop":
        import uvloop

        return uvloop.run(main(spec))
    return asyncio.run(main(spec))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    result = run(json.loads(sys.argv[1]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
