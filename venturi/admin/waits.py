"""Why a pending job is not running, as operators read it (SPEC 13; ``venturi jobs
show`` and the dashboard's job page): its group's limits (``admin.groups``: at its cap,
paused, out of tokens) and its kind's, here: every live worker that runs the kind holds
as many of its jobs as its ``cap``, the kind is at its ``global_cap``, or no live worker
runs it. A paused kind is said apart (``JobDetail.kind_paused``); a job not yet due
waits for its time, which its ``visible_at`` says."""

from __future__ import annotations

from datetime import UTC, datetime

from venturi import db
from venturi.db.conn import Conn
from venturi.jobs import JobInfo
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import DEFAULT_LIVENESS, JobStatus

__all__ = ["GLOBAL_CAP", "KIND_AT_CAP", "UNSERVED", "held_now", "kind_waits"]

# The reasons, as they are shown.
GLOBAL_CAP = "kind at its global cap"
KIND_AT_CAP = "kind at its cap on every live worker that runs it"
UNSERVED = "no live worker runs its kind"


def held_now(job: JobInfo) -> bool:
    """Whether ``job`` is pending and due: a job that can be held back by a limit (its
    kind's, its group's) rather than waiting for its time."""
    return job.status == JobStatus.PENDING and job.visible_at <= datetime.now(UTC)


async def kind_waits(
    conn: Conn,
    job: JobInfo,
    *,
    schema: str = DEFAULT_SCHEMA,
    liveness: float = DEFAULT_LIVENESS,
) -> str | None:
    """Why the kind holds ``job`` back now, or None: the job is not pending, not due
    yet, or its kind has room (its workers may still be busy with other kinds). The
    limits are those the live workers registered (a worker from before migration 20
    counts as uncapped); ``liveness``: seconds without a heartbeat after which a worker
    is gone."""
    if not held_now(job):
        return None
    row = await db.workers.kind_waits(conn, schema=schema, kind=job.kind, liveness=liveness)
    if row["serving"] == 0:
        return UNSERVED
    if row["global_cap"] is not None and row["claimed"] >= row["global_cap"]:
        return f"{GLOBAL_CAP} ({row['claimed']} claimed of {row['global_cap']})"
    if row["at_cap"] == row["serving"]:
        return f"{KIND_AT_CAP} ({row['serving']})"
    return None
