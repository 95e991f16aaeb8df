"""The health of the queue, per kind: ``KindHealth`` is the one struct ``venturi stats``,
``venturi top``, the dashboard's overview and the queue gauges (``venturi metrics``)
read, each from the statement that fits its pace (``stats`` counts every finished job;
``top`` and the overview count only recent and failed ones, so they stay cheap every
second; the gauges read no journal at all). Each marks the kinds an operator paused and
those whose due jobs no live worker registers, by one rule (``unserved``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.kinds import PausedKind, paused_kinds
from venturi.admin.workers import WorkerInfo, list_workers
from venturi.db.conn import Conn
from venturi.kind_health import KindHealth, unserved
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import DEFAULT_LIVENESS, MANUAL_RETRY

# What venturi.admin exports from here.
__all__ = [
    "ACTIVITY_MINUTES",
    "FAILURES_WINDOW",
    "RECENT_WINDOW",
    "STATS_COMPLETED_WINDOW",
    "TOP_COMPLETED_WINDOW",
    "Fleet",
    "KindHealth",
    "Minute",
    "Overview",
    "Stats",
    "TopFrame",
    "activity",
    "fleet",
    "overview",
    "stats",
    "top_frame",
]

# Windows of the recent counts: `venturi stats` reports completions in the last minute,
# `venturi top` a per-second rate over the last ten seconds; both count failures over
# the last hour. The dashboard's overview counts both over the last hour.
STATS_COMPLETED_WINDOW = 60.0
TOP_COMPLETED_WINDOW = 10.0
FAILURES_WINDOW = 3600.0
RECENT_WINDOW = 3600.0
# The span of the dashboard's charts, in minutes.
ACTIVITY_MINUTES = 60


class Fleet(msgspec.Struct, frozen=True):
    """The workers a health read shows below the kinds (live and gone: not the stopped
    ones), the kinds live workers register, and the paused kinds."""

    running: list[WorkerInfo]
    served: frozenset[str]
    paused: list[PausedKind]

    def flag(self, row: Any) -> KindHealth:
        """A kind's row with its ``paused`` and ``no_live_worker`` marks."""
        names = {p.kind for p in self.paused}
        fields = dict(row)
        return KindHealth(
            **fields,
            paused=fields["kind"] in names,
            no_live_worker=unserved(fields["due"], fields["kind"] in self.served),
        )

    def flag_all(self, rows: Iterable[Any]) -> list[KindHealth]:
        return [self.flag(r) for r in rows]


async def fleet(
    conn: Conn, *, liveness: float = DEFAULT_LIVENESS, schema: str = DEFAULT_SCHEMA
) -> Fleet:
    """Read the workers and the paused kinds a health read marks its kinds with."""
    workers = await list_workers(conn, liveness=liveness, schema=schema)
    return Fleet(
        [w for w in workers if w.state != "stopped"],
        frozenset(k for w in workers if w.state == "live" for k in w.kinds),
        await paused_kinds(conn, schema=schema),
    )


async def _windowed(
    read: Callable[..., Awaitable[list[Any]]],
    conn: Conn,
    completed_window: float,
    failures_window: float,
    liveness: float,
    schema: str,
) -> tuple[list[KindHealth], Fleet]:
    """The kinds of a statement counting over two windows (``job_stats``, ``job_top``),
    marked, and the fleet they were marked by."""
    # An infinite window overflowed the server's interval; a negative one counted nothing.
    validate.seconds(completed_window, "completed_window")
    validate.seconds(failures_window, "failures_window")
    rows = await read(
        conn,
        schema=schema,
        manual_detail=MANUAL_RETRY,
        completed_window=completed_window,
        failures_window=failures_window,
    )
    f = await fleet(conn, liveness=liveness, schema=schema)
    return f.flag_all(rows), f


class Stats(msgspec.Struct, frozen=True):
    """Every kind's counts, the windows of the recent counts in seconds, and the
    workers that are live or gone (``liveness_seconds`` tells them apart)."""

    completed_window_seconds: float
    failures_window_seconds: float
    kinds: list[KindHealth]
    liveness_seconds: float = DEFAULT_LIVENESS
    workers: list[WorkerInfo] = []


async def stats(
    conn: Conn,
    *,
    completed_window: float = STATS_COMPLETED_WINDOW,
    failures_window: float = FAILURES_WINDOW,
    liveness: float = DEFAULT_LIVENESS,
    schema: str = DEFAULT_SCHEMA,
) -> Stats:
    """Counts per kind and status, the oldest due job's wait, completions in the last
    ``completed_window`` seconds and failed executions in the last ``failures_window``;
    which kinds are paused or have due jobs that no live worker registers; the workers
    live or gone (no heartbeat for ``liveness`` seconds)."""
    liveness = validate.seconds(liveness, "liveness")
    kinds, f = await _windowed(
        db.operations.job_stats, conn, completed_window, failures_window, liveness, schema
    )
    return Stats(completed_window, failures_window, kinds, liveness, f.running)


class TopFrame(msgspec.Struct, frozen=True):
    """Everything one frame of ``venturi top`` shows, read in one round of queries."""

    at: datetime
    completed_window_seconds: float
    failures_window_seconds: float
    kinds: list[KindHealth]
    workers: list[WorkerInfo]
    liveness_seconds: float = DEFAULT_LIVENESS


async def top_frame(
    conn: Conn,
    *,
    completed_window: float = TOP_COMPLETED_WINDOW,
    failures_window: float = FAILURES_WINDOW,
    liveness: float = DEFAULT_LIVENESS,
    schema: str = DEFAULT_SCHEMA,
) -> TopFrame:
    """Read one frame of ``venturi top``; it never counts all completed jobs. Its
    workers are the live and gone ones, idle or not (``list_workers``)."""
    liveness = validate.seconds(liveness, "liveness")
    kinds, f = await _windowed(
        db.operations.job_top, conn, completed_window, failures_window, liveness, schema
    )
    return TopFrame(
        datetime.now(UTC), completed_window, failures_window, kinds, f.running, liveness
    )


class Overview(msgspec.Struct, frozen=True):
    """The dashboard's overview: every kind (a paused one without jobs too; recent counts
    over the last hour) and the paused kinds, when, by whom and why."""

    kinds: list[KindHealth]
    paused: list[PausedKind]


async def overview(
    conn: Conn, *, window: float = RECENT_WINDOW, schema: str = DEFAULT_SCHEMA
) -> Overview:
    """Read the overview; like ``top_frame`` it never counts all completed jobs."""
    rows = await db.dashboard.job_overview(
        conn, schema=schema, manual_detail=MANUAL_RETRY, window=window
    )
    f = await fleet(conn, schema=schema)
    kinds = f.flag_all(rows)
    seen = {k.kind for k in kinds}
    kinds += [KindHealth.idle(p.kind, paused=True) for p in f.paused if p.kind not in seen]
    kinds.sort(key=lambda k: k.kind)
    return Overview(kinds, f.paused)


class Minute(msgspec.Struct, frozen=True):
    """Completions and failed executions in one minute (the dashboard's charts)."""

    minute: datetime
    completed: int
    failures: int


async def activity(
    conn: Conn, *, minutes: int = ACTIVITY_MINUTES, schema: str = DEFAULT_SCHEMA
) -> list[Minute]:
    """Completions and failed executions per minute, oldest first, every minute present."""
    rows = await db.dashboard.job_activity_per_minute(
        conn, schema=schema, manual_detail=MANUAL_RETRY, minutes=minutes
    )
    return [Minute(**dict(r)) for r in rows]
