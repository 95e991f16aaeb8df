"""The chaos soak's knobs and its tasks: ``Config``, with ``SHORT`` (the short soak, the one
CI runs) and ``LONG`` (a release's soak); and ``TASKS``, the chaos kinds' declared tasks by
kind (the producer builds its jobs with them, the history check reads their leases, caps
and ``renew_lease``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import venturi

# grouptasks for its import alone: it declares the grouped kinds, which TASKS must hold.
from . import grouptasks, tasks  # noqa: F401


@dataclass(frozen=True)
class Config:
    mode: str
    seconds: float  # how long jobs are enqueued and faults injected
    min_jobs: int  # keep enqueueing past `seconds` until this many (long mode)
    workers: int
    concurrency: int
    lease: float  # the workers' default lease: how soon a killed worker's claims return
    poll_max: float
    shutdown_timeout: float
    kills: int
    terms: int
    terminates: int
    restarts: int
    backlog: int  # the producer waits while more jobs than this are unfinished
    batch: int
    drain_seconds: float  # how long the workers get to finish after the last enqueue
    seed: int = 1
    group_workers: int = 4  # workers of the grouped kinds (tests/chaos/grouptasks.py)
    # The ordinary workers run the grouped kinds too (tests/chaos/alltasks.py).
    mixed: bool = False


SHORT = Config(
    mode="short",
    seconds=60,
    min_jobs=0,
    workers=4,
    concurrency=8,
    lease=4.0,
    poll_max=1.0,
    shutdown_timeout=1.0,
    kills=6,
    terms=3,
    terminates=3,
    restarts=1,
    backlog=1500,
    batch=100,
    drain_seconds=60,
)
LONG = replace(
    SHORT,
    mode="long",
    mixed=True,
    seconds=660,
    min_jobs=100_000,
    kills=30,
    terms=15,
    terminates=15,
    backlog=3000,
    batch=200,
    drain_seconds=120,
)

# The chaos kinds' tasks by kind: every kind of tasks.EXPECTED, the grouped ones included.
TASKS = {t.kind: t for t in venturi.tasks.registered().values() if t.kind in tasks.EXPECTED}
