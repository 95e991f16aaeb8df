"""Queue gauges for Prometheus: what is waiting, running and failed per kind, the
workers live or gone, and each kind's groups (SPEC 13: how many are busy, and the pending
and claimed jobs of the ``GROUP_SERIES`` groups with the most pending jobs, so the series
stay bounded), read from the database with two statements (``queue_gauges``,
``group_gauges``) per interval, so no worker is needed: ``venturi metrics --port P`` runs the read on its own;
``QueueGauges`` is the same read as a maintenance task of a worker that exports metrics.

The gauges are served from the last read (a custom collector), so a scrape never waits
on the database and never sees half a read; ``venturi_queue_read_age_seconds`` says how
old that read is, and ``venturi_queue_up`` whether the last one succeeded.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import msgspec

from venturi import db, validate
from venturi.db.conn import Conn
from venturi.kind_health import KindHealth, unserved
from venturi.runtime import instruments
from venturi.status import DEFAULT_LIVENESS, JobStatus

log = logging.getLogger("venturi.metrics")

DEFAULT_INTERVAL = 15.0
# Per-group series only for this many groups per kind: those with the most pending jobs
# (then the most claimed). A group that leaves them loses its series at the next read.
GROUP_SERIES = 20

# (gauge, help, column) per kind; every one is labelled by kind.
_PER_KIND = (
    (
        "venturi_queue_oldest_due_seconds",
        "Seconds the oldest due job has been claimable, by kind.",
        "oldest_due_seconds",
    ),
    (
        "venturi_queue_claims_expired",
        "Claimed jobs whose lease has run out (awaiting recovery), by kind.",
        "expired",
    ),
    ("venturi_queue_kind_paused", "1 when an operator paused the kind.", "paused"),
    ("venturi_queue_kind_workers", "Live workers that register the kind.", "workers"),
)
# The jobs gauge's ``status`` label: due and scheduled split the pending jobs.
_STATUSES = (
    "due",
    "scheduled",
    JobStatus.WAITING,
    JobStatus.CLAIMED,
    JobStatus.DEAD,
    JobStatus.CANCELLED,
)
# The per-kind columns of ``queue_gauges``, named as ``KindHealth``'s fields.
_COLUMNS = tuple(
    f.name
    for f in msgspec.structs.fields(KindHealth)
    if f.name not in {"no_live_worker", JobStatus.COMPLETED, "completed_recent", "failures_recent"}
)


def _kind(row: Any) -> KindHealth:
    return KindHealth(
        **{name: row[name] for name in _COLUMNS},
        no_live_worker=unserved(row["due"], row["workers"] > 0),
    )


class GroupGauge(msgspec.Struct, frozen=True):
    """One of a kind's top groups: its pending and claimed jobs."""

    kind: str
    group: str
    pending: int
    claimed: int


class Snapshot:
    """One read of ``queue_gauges`` and ``group_gauges``: each kind's health, the fleet's
    live and gone workers, each kind's busy groups (``groups``: a count per kind; ``top``:
    the top groups' jobs), and when it was taken."""

    def __init__(self, rows: list[Any], at: float, group_rows: list[Any] | None = None) -> None:
        self.kinds = [_kind(r) for r in rows if r["kind"] is not None]
        first = rows[0] if rows else None
        self.live = int(first["workers_live"]) if first else 0
        self.gone = int(first["workers_gone"]) if first else 0
        found = group_rows or []
        self.groups = {k.kind: 0 for k in self.kinds} | {r["kind"]: r["groups"] for r in found}
        self.top = [GroupGauge(r["kind"], r["grp"], r["pending"], r["claimed"]) for r in found]
        self.at = at


def group_families(snap: Snapshot) -> Iterator[Any]:
    """``venturi_groups{kind}`` and ``venturi_group_jobs{kind,group,status}`` (the top
    groups' pending and claimed jobs) of a snapshot."""
    from prometheus_client.core import GaugeMetricFamily

    count = GaugeMetricFamily(
        "venturi_groups", "Groups with pending or claimed jobs, by kind.", labels=["kind"]
    )
    for kind, n in sorted(snap.groups.items()):
        count.add_metric([kind], n)
    yield count
    jobs = GaugeMetricFamily(
        "venturi_group_jobs",
        f"Pending and claimed jobs of the {GROUP_SERIES} groups of each kind with the most "
        "pending jobs, by kind, group and status (other groups have no series).",
        labels=["kind", "group", "status"],
    )
    for g in snap.top:
        jobs.add_metric([g.kind, g.group, JobStatus.PENDING], g.pending)
        jobs.add_metric([g.kind, g.group, JobStatus.CLAIMED], g.claimed)
    yield jobs


class QueueCollector:
    """Yields the gauges of the last snapshot at each scrape (prometheus-client's custom
    collector protocol)."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.up = False

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily("venturi_queue_up", "1 when the last read of the queue succeeded.")
        up.add_metric([], 1.0 if self.up else 0.0)
        yield up
        snap = self.snapshot
        if snap is None:
            return
        age = GaugeMetricFamily(
            "venturi_queue_read_age_seconds", "Seconds since the queue gauges were read."
        )
        age.add_metric([], time.monotonic() - snap.at)
        yield age
        workers = GaugeMetricFamily(
            "venturi_queue_workers",
            "Registered workers not stopped, by state (live, gone).",
            labels=["state"],
        )
        workers.add_metric(["live"], snap.live)
        workers.add_metric(["gone"], snap.gone)
        yield workers
        jobs = GaugeMetricFamily(
            "venturi_queue_jobs",
            "Jobs by kind and status (due and scheduled are pending; completed jobs are "
            "counted by venturi_jobs_settled).",
            labels=["kind", "status"],
        )
        for k in snap.kinds:
            for status in _STATUSES:
                jobs.add_metric([k.kind, status], getattr(k, status))
        yield jobs
        for name, text, column in _PER_KIND:
            g = GaugeMetricFamily(name, text, labels=["kind"])
            for k in snap.kinds:
                value = getattr(k, column)
                if value is not None:
                    g.add_metric([k.kind], float(value))
            yield g
        without = GaugeMetricFamily(
            "venturi_queue_kind_without_worker",
            "1 when the kind has due jobs and no live worker registers it.",
            labels=["kind"],
        )
        for k in snap.kinds:
            without.add_metric([k.kind], 1.0 if k.no_live_worker else 0.0)
        yield without
        yield from group_families(snap)


@functools.cache
def collector() -> QueueCollector:
    """The process's queue collector, registered once with prometheus-client's default
    registry (beside the workers' own metrics); ``ConfigError`` without the extra."""
    instruments.get()  # the one check that prometheus-client is installed
    from prometheus_client import REGISTRY

    found = QueueCollector()
    REGISTRY.register(found)
    return found


async def refresh(conn: Conn, *, schema: str, liveness: float = DEFAULT_LIVENESS) -> Snapshot:
    """Read the queue gauges (and the groups') once into the process's collector."""
    target = collector()
    try:
        rows = await db.workers.queue_gauges(conn, schema=schema, liveness=liveness)
        group_rows = await db.workers.group_gauges(conn, schema=schema, top=GROUP_SERIES)
    except BaseException:
        target.up = False
        raise
    target.snapshot = Snapshot(rows, time.monotonic(), group_rows)
    target.up = True
    return target.snapshot


class QueueGauges:
    """Maintenance task: the queue gauges from a worker that exports metrics
    (``Worker(metrics_port=...)``, ``venturi worker --queue-metrics``), read every
    ``interval``. One worker of a fleet is enough; each read is one cheap statement."""

    name = "queue_gauges"

    def __init__(
        self,
        *,
        interval: timedelta | float = DEFAULT_INTERVAL,
        liveness: timedelta | float = DEFAULT_LIVENESS,
    ) -> None:
        self.interval = validate.seconds(interval, "queue_gauges interval")
        self.liveness = validate.seconds(liveness, "queue_gauges liveness")
        collector()  # fail now, not at the first interval, without prometheus-client

    def __repr__(self) -> str:
        return f"<venturi.QueueGauges every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        await refresh(pool, schema=worker.schema, liveness=self.liveness)
