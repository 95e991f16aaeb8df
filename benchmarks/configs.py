"""The benchmark of record's sizes and every system's worker configurations.

``QUICK`` and ``FULL`` are the two ``Plan`` sizes of ``python -m benchmarks.compare``
(``--quick`` or not; the README's table of sizes mirrors them). ``DRAIN_CONFIGS`` holds
each system's worker configuration per concurrency level, ``OWN_BEST`` a peer's own
fastest documented configuration where it is none of those, ``LATENCY_CONFIGS`` the
pickup-latency worker of each: a label (printed with the results) and the configuration
its adapter's ``worker`` takes (``benchmarks.systems``).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import Any


def _oban_missing() -> str | None:
    """Why oban cannot run here, or None: every release needs Python >= 3.12."""
    if sys.version_info < (3, 12):
        return (
            "pip: every release (0.5.0-0.7.0) requires Python >= 3.12; this run is on "
            f"{sys.version_info[0]}.{sys.version_info[1]}"
        )
    # mypy checks as Python 3.11 (pyproject's python_version), where the return above
    # always runs; on 3.12 and later this line does.
    if importlib.util.find_spec("oban") is None:  # type: ignore[unreachable]
        return "not installed (pip install oban; the bench extra brings it on Python >= 3.12)"
    return None


# Peers that cannot run here, and why (pip's own answer on this machine).
LEFT_OUT = {name: why for name, why in (("oban", _oban_missing()),) if why}
SYSTEMS = tuple(
    n
    for n in ("venturi", "procrastinate", "pgqueuer", "chancy", "dbos", "oban")
    if n not in LEFT_OUT
)
PEERS = SYSTEMS[1:]
LEVELS = (1, 10, 32)


@dataclass(frozen=True)
class Plan:
    """How much of everything a run does."""

    repeat: int  # rounds of the enqueue and drain measurements (median reported)
    bulk_jobs: int  # jobs per bulk-enqueue measurement...
    bulk_batch: int  # ...in calls of this many jobs, each its own transaction
    single_jobs: int  # one job per call, each its own transaction
    drain_jobs: int  # no-op jobs drained per drain measurement
    latency_samples: int  # single jobs enqueued to an idle worker
    health_small: int  # pending rows of the "small table" drain
    health_big: int  # pending rows of the "big table" drain
    health_drain: int  # jobs drained from each of the two
    rss_jobs: int  # jobs venturi drains for its peak-RSS figure
    ceiling_fill: int  # pending rows the raw-SQL ceiling claims from
    ceiling_seconds: float  # duration of each ceiling configuration
    drain_timeout: float  # a drain still running after this many seconds is cut short
    checkpoint: bool  # CHECKPOINT before each timed run (steadier, slower)


QUICK = Plan(
    repeat=1,
    bulk_jobs=10_000,
    bulk_batch=1_000,
    single_jobs=300,
    drain_jobs=1_500,
    latency_samples=40,
    health_small=10_000,
    health_big=100_000,
    health_drain=1_000,
    rss_jobs=20_000,
    ceiling_fill=100_000,
    ceiling_seconds=1.0,
    drain_timeout=10.0,
    checkpoint=False,
)

FULL = Plan(
    repeat=3,
    bulk_jobs=20_000,
    bulk_batch=1_000,
    single_jobs=2_000,
    drain_jobs=20_000,
    latency_samples=200,
    health_small=10_000,
    health_big=1_000_000,
    health_drain=10_000,
    rss_jobs=100_000,
    ceiling_fill=1_000_000,
    ceiling_seconds=8.0,
    drain_timeout=300.0,
    checkpoint=True,
)

# Worker configurations per concurrency level: (label, config for the adapter's worker).
# "Concurrency N" means at most about N jobs in flight in one worker process.
DRAIN_CONFIGS: dict[str, dict[int, list[tuple[str, dict[str, Any]]]]] = {
    "venturi": {n: [(f"Worker(concurrency={n})", {"concurrency": n})] for n in LEVELS},
    "procrastinate": {
        n: [
            (
                f"run_worker_async(concurrency={n}), PsycopgConnector default pool (4), "
                "listen_notify",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "chancy": {
        n: [
            (
                f"Queue(concurrency={n}, executor=Async, eager_polling=True, polling_interval=1)",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "dbos": {
        n: [
            (
                f"queue worker_concurrency={n}, polling_interval_sec=0.01, async workflow",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "oban": {
        n: [
            (
                f"Oban(queues={{'bench': {n}}}), create_pool default (10), LISTEN/NOTIFY, "
                "debounce 5 ms",
                {"concurrency": n},
            )
        ]
        for n in LEVELS
    },
    "pgqueuer": {
        1: [("1 consumer, batch_size=1, drain mode", {"consumers": 1, "batch_size": 1})],
        10: [
            ("1 consumer, batch_size=10, drain mode", {"consumers": 1, "batch_size": 10}),
            (
                "1 consumer, batch_size=5, max_concurrent_tasks=10, drain mode",
                {"consumers": 1, "batch_size": 5, "max_concurrent_tasks": 10},
            ),
        ],
        32: [
            (
                "1 consumer, batch_size=16, max_concurrent_tasks=32, drain mode",
                {"consumers": 1, "batch_size": 16, "max_concurrent_tasks": 32},
            )
        ],
    },
}
for _levels in DRAIN_CONFIGS["pgqueuer"].values():
    for _label, _cfg in _levels:
        _cfg["drain"] = True

# A peer's own fastest documented configuration, when it is not one of the levels above:
# pgqueuer's benchmark tool (tools/benchmark.py, drain strategy) runs five PgQueuer
# consumers of batch size 10 in one process on uvloop.
OWN_BEST: dict[str, tuple[str, dict[str, Any]]] = {
    "pgqueuer": (
        "5 consumers x batch_size=10, drain mode (its benchmark tool's configuration)",
        {"consumers": 5, "batch_size": 10, "drain": True},
    ),
}

LATENCY_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "venturi": ("Worker(concurrency=10)", {"concurrency": 10}),
    "procrastinate": ("run_worker_async(concurrency=10), listen_notify", {"concurrency": 10}),
    "pgqueuer": ("1 consumer, batch_size=10, continuous mode", {"consumers": 1, "batch_size": 10}),
    "chancy": (
        "Queue(concurrency=10, executor=Async, eager_polling=True, polling_interval=1)",
        {"concurrency": 10},
    ),
    "dbos": ("queue worker_concurrency=10, polling_interval_sec=0.01", {"concurrency": 10}),
    "oban": ("Oban(queues={'bench': 10}), LISTEN/NOTIFY", {"concurrency": 10}),
}


def relaxed() -> None:
    """venturi's drain and pickup configurations with ``synchronous_commit=False``
    (``--no-synchronous-commit``), named so in the output."""
    suffix = ", synchronous_commit=False"
    for level, configs in DRAIN_CONFIGS["venturi"].items():
        DRAIN_CONFIGS["venturi"][level] = [
            (label[:-1] + suffix + ")", {**cfg, "synchronous_commit": False})
            for label, cfg in configs
        ]
    label, cfg = LATENCY_CONFIGS["venturi"]
    LATENCY_CONFIGS["venturi"] = (label[:-1] + suffix + ")", {**cfg, "synchronous_commit": False})
