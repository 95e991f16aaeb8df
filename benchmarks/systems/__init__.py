"""The systems under test, one adapter module each, behind one protocol (as pgqueuer's own
``tools/benchmark.py`` takes one strategy per system).

An adapter module ``benchmarks.systems.<name>`` holds two halves, each driven through the
system's own public API and its own recommended driver:

- ``Client``: what the harness process uses to install the schema, empty the tables
  between measurements and enqueue jobs (``Client`` below; a workflow adapter's client
  enqueues workflows instead, ``WorkflowClient``);
- ``worker(dsn, cfg, stop)``: the worker that ``benchmarks.worker_proc`` runs in a
  subprocess until ``stop`` is set, so that each worker's CPU time and peak RSS are its
  own. Its handlers report to ``benchmarks.probe``.

The plain-job adapters are venturi, procrastinate, pgqueuer, chancy, dbos and oban; their
workflow twins (``<name>-wf``, in ``<name>_wf``) are venturi's, chancy's and DBOS's. An
adapter is imported when it is first asked for, so a peer that is not installed costs
nothing until it runs. The only SQL text an adapter writes is its system's housekeeping
between measurements (TRUNCATE, ANALYZE, a count); venturi's statements come from
``venturi.sql``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any, Protocol

# System name -> its adapter module under benchmarks.systems.
ADAPTERS = {
    "venturi": "venturi",
    "procrastinate": "procrastinate",
    "pgqueuer": "pgqueuer",
    "chancy": "chancy",
    "dbos": "dbos",
    "oban": "oban",
    "venturi-wf": "venturi_wf",
    "chancy-wf": "chancy_wf",
    "dbos-wf": "dbos_wf",
}

# Every adapter's worker is an ``async def``: a coroutine, which asyncio.create_task takes.
WorkerRun = Callable[[str, dict[str, Any], asyncio.Event], Coroutine[Any, Any, None]]


class Client(Protocol):
    """The harness's side of a system: one per system and database."""

    name: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def install(self) -> None:
        """Create the system's schema in its database."""

    async def reset(self) -> None:
        """Empty the system's tables."""

    async def analyze(self) -> None:
        """Fresh statistics on its tables (after every fill, for every system alike)."""

    async def enqueue_one(self, i: int) -> None:
        """Enqueue no-op job ``i`` in a transaction of its own."""

    async def enqueue_bulk(self, start: int, n: int) -> None:
        """Enqueue jobs ``start .. start + n - 1`` through the system's batch API."""

    async def unfinished(self) -> int:
        """Jobs not yet finished (pending or running)."""


class WorkflowClient(Protocol):
    """The harness's side of a workflow adapter."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def install(self) -> None: ...

    async def reset(self) -> None: ...

    async def analyze(self) -> None: ...

    async def enqueue_workflows(self, scenario: str, n: int) -> None:
        """Enqueue ``n`` workflows of ``scenario`` (``three`` or ``fanout``)."""


def adapter(system: str) -> ModuleType:
    """The adapter module of ``system`` (a name of ``ADAPTERS``)."""
    return importlib.import_module(f"{__name__}.{ADAPTERS[system]}")


def client(system: str, dsn: str) -> Any:
    """A new ``Client`` (or ``WorkflowClient``) of ``system`` on ``dsn``."""
    return adapter(system).Client(dsn)


def worker(system: str) -> WorkerRun:
    """The worker run of ``system``, for ``benchmarks.worker_proc``."""
    run: WorkerRun = adapter(system).worker
    return run
