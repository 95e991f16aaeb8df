"""The worker's instruments: its stats counter and, when asked for, Prometheus metrics
(the ``metrics`` extra: prometheus-client), behind one object.

prometheus-client is the reference client: it owns the exposition format, the registry
and the HTTP exporter, which we would otherwise re-implement. Metrics are process-wide
(one registry), labelled by kind; several workers in one process share them.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from typing import Any

from venturi.errors import ConfigError
from venturi.runtime.settlement import (
    Cancelled,
    Completed,
    Dead,
    Failed,
    Paused,
    Released,
    Retried,
    TimedOut,
    Undecodable,
)

# Buckets for run durations and pickup latency: a no-op job takes milliseconds, a real
# one seconds to minutes.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    """The worker's instruments."""

    def __init__(self, prom: Any) -> None:
        self.settled = prom.Counter(
            "venturi_jobs_settled", "Jobs settled, by kind and outcome.", ["kind", "outcome"]
        )
        self.run_seconds = prom.Histogram(
            "venturi_job_run_seconds", "Handler run time, by kind.", ["kind"], buckets=_BUCKETS
        )
        self.pickup_seconds = prom.Histogram(
            "venturi_job_pickup_seconds",
            "Time from a job becoming visible to its claim, by kind.",
            ["kind"],
            buckets=_BUCKETS,
        )
        self.in_flight = prom.Gauge(
            "venturi_jobs_in_flight", "Jobs running now, by kind.", ["kind"]
        )
        self.claims = prom.Counter("venturi_claims", "Claim statements run.")
        self.empty_claims = prom.Counter("venturi_empty_claims", "Claims that found no job.")
        self.claimed = prom.Counter("venturi_jobs_claimed", "Jobs claimed, by kind.", ["kind"])
        self.db_errors = prom.Counter("venturi_db_errors", "Database errors the worker retried.")
        self.listen_reconnects = prom.Counter(
            "venturi_listen_reconnects", "Times the LISTEN connection was lost and re-opened."
        )
        self.ownership_lost = prom.Counter(
            "venturi_settles_skipped",
            "Settles skipped because the claim was lost, by kind.",
            ["kind"],
        )


_lock = threading.Lock()
_served: dict[tuple[str, int], Any] = {}


@functools.cache
def get() -> Metrics:
    """The process-wide instruments; ``ConfigError`` if prometheus-client is missing."""
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "metrics need prometheus-client: pip install 'venturi-jobs[metrics]'"
        ) from None
    return Metrics(prometheus_client)


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Start the HTTP exporter on ``port`` once per process (later calls are no-ops)."""
    import prometheus_client

    with _lock:
        if (addr, port) not in _served:
            _served[(addr, port)] = prometheus_client.start_http_server(port, addr)


def serve_or_refuse(port: int, knob: str) -> None:
    """``serve(port)``, a port that cannot be bound (in use, not ours) a ``ConfigError``
    naming ``knob`` rather than a bare ``OSError``."""
    try:
        serve(port)
    except OSError as exc:
        raise ConfigError(
            f"{knob} {port}: cannot listen ({exc.strerror or exc}); "
            "choose a free port or stop what holds it"
        ) from None


# The stop line's counters (the settlements' stats keys), in the order it names them,
# and how it says those that do not read as they are.
_SUMMARY = (
    Completed.name,
    Failed.name,
    TimedOut.name,
    Retried.name,
    Paused.name,
    Dead.name,
    Undecodable.name,
    Cancelled.name,
    Released.name,
)
_SAID = {
    TimedOut.name: "timed out",
    Retried.name: "retried",
    Paused.name: "paused",
    Released.name: "released",
}


def summary(stats: Counter[str]) -> str:
    """What a worker run did, as the sentence of its stop line: ``ran 120 jobs (117
    completed, 3 failed); recovered 1 expired claim; 2 database errors retried``."""
    settled = [(stats[k], _SAID.get(k, k)) for k in _SUMMARY if stats[k]]
    total = sum(n for n, _ in settled)
    said = f"ran {total} job{'' if total == 1 else 's'}"
    if settled:
        said += " (" + ", ".join(f"{n} {what}" for n, what in settled) + ")"
    for key, one, many in (
        ("recovered", "recovered 1 expired claim", "recovered {} expired claims"),
        ("claims_lost", "1 claim lost while running", "{} claims lost while running"),
        ("ownership_lost", "1 settle skipped (claim lost)", "{} settles skipped (claims lost)"),
        ("db_errors", "1 database error retried", "{} database errors retried"),
    ):
        if stats[key]:
            said += "; " + (one if stats[key] == 1 else many.format(stats[key]))
    return said


class Instruments:
    """What a worker counts. ``stats`` is its own counter (``Worker.stats``); ``prom`` the
    process-wide Prometheus metrics, or None when the worker does not export them. The
    hot path reads both directly: one attribute and one test each, no call."""

    def __init__(self, prometheus: bool) -> None:
        self.stats: Counter[str] = Counter()
        self.prom: Metrics | None = get() if prometheus else None

    def db_error(self) -> None:
        self.stats["db_errors"] += 1
        if self.prom:
            self.prom.db_errors.inc()

    def listen_reconnect(self) -> None:
        self.stats["listen_reconnects"] += 1
        if self.prom:
            self.prom.listen_reconnects.inc()
