"""One worker of one system in its own process: ``python -m benchmarks.worker_proc SPEC``.

SPEC is a JSON object: ``system``, ``dsn``, ``cfg`` (the system's worker configuration),
``mode`` (``drain`` or ``latency``), ``target`` (drain: stop after this many jobs),
``loop`` (``uvloop`` or ``asyncio``) and ``timeout`` (seconds: the worker stops then even
if it has not seen ``target`` jobs, and reports what it saw).

The process reports on stdout, one line each:
- ``ready`` once the worker has been running for ``settle`` seconds (latency mode);
- ``J <i> <monotonic>`` when the handler of job ``i`` starts (latency mode only);
- a final JSON object: jobs seen, the monotonic instants of the first, the
  ``target``-th and the last job (and of the first ``probe.begin()``, if any), CPU
  seconds and peak RSS (VmHWM) of this process.

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

from benchmarks import probe, systems


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    with contextlib.suppress(Exception):
        sys.stdin.read()
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(stop.set)


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    stop = asyncio.Event()
    latency = spec["mode"] == "latency"
    seen = probe.Probe(spec.get("target") or 0, stop, echo=latency)
    probe.install(seen, seen.begin)
    loop = asyncio.get_running_loop()
    if latency:
        threading.Thread(target=_watch_stdin, args=(loop, stop), daemon=True).start()
    loop.call_later(spec.get("timeout", 600), stop.set)
    started = time.monotonic()
    run = asyncio.create_task(systems.worker(spec["system"])(spec["dsn"], spec["cfg"], stop))
    if latency:
        await asyncio.wait([run], timeout=spec.get("settle", 1.0))
        if run.done():
            run.result()  # a worker that died at start: raise its error
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    await run
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "count": seen.count,
        "t_start": started,
        "t_begin": seen.t_begin,
        "t_first": seen.t_first,
        "t_target": seen.t_target,
        "t_last": seen.t_last,
        "t_exit": time.monotonic(),
        "cpu_window": seen.cpu_target - seen.cpu_first if seen.t_target else None,
        "cpu_user": usage.ru_utime,
        "cpu_sys": usage.ru_stime,
        "maxrss_kb": probe.peak_rss_kb(),
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
