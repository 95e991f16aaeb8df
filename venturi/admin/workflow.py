"""A job's workflow side as ``venturi jobs show`` lists it (SPEC 12): its recorded steps,
the signals sent to it, its children and its dependencies with their statuses, and what
it waits for now while ``waiting``. A plain job has none of these: empty lists."""

from __future__ import annotations

from datetime import datetime

import msgspec

from venturi import db
from venturi.db.conn import Conn
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import JobStatus


class RecordedStep(msgspec.Struct, frozen=True):
    """A step the workflow recorded (``ctx.step``, and the timers of ``ctx.sleep``)."""

    name: str
    recorded_at: datetime


class SentSignal(msgspec.Struct, frozen=True):
    """A signal sent to the job (the first of each name wins)."""

    name: str
    sent_at: datetime


class ChildJob(msgspec.Struct, frozen=True):
    """A job the workflow spawned (``ctx.spawn``)."""

    id: int
    kind: str
    status: str


class DependencyJob(msgspec.Struct, frozen=True):
    """A ``venturi.Workflow`` node this job runs after, by its node name; ``kind`` and
    ``status`` are None once retention deleted it."""

    name: str
    id: int
    kind: str | None
    status: str | None


class WaitingFor(msgspec.Struct, frozen=True):
    """What a waiting job waits for now: its timer (``wake_at``: a sleep, or a signal's
    timeout), the signal ``signal``, and the awaited jobs not yet ended (``jobs``): of
    them ``children`` are its children (a gather), ``dependencies`` its dependencies."""

    wake_at: datetime | None
    signal: str | None
    children: int
    dependencies: int
    jobs: list[int]


class WorkflowSide(msgspec.Struct, frozen=True):
    """The workflow side of one job (all empty for a plain job)."""

    parent_id: int | None
    steps: list[RecordedStep]
    signals: list[SentSignal]
    children: list[ChildJob]
    dependencies: list[DependencyJob]
    waiting_for: WaitingFor | None


async def workflow_side(
    conn: Conn, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> WorkflowSide | None:
    """The job's steps, signals, children, dependencies and current wait (one
    statement), or None when the job does not exist."""
    row = await db.workflow.job_workflow_get(conn, schema=schema, job_id=job_id)
    if row is None:
        return None
    children = msgspec.json.decode(row["children"], type=list[ChildJob])
    dependencies = msgspec.json.decode(row["dependencies"], type=list[DependencyJob])
    waiting = None
    if row["status"] == JobStatus.WAITING:
        awaited = list(row["wait_for"] or [])
        mine = {c.id for c in children}
        after = {d.id for d in dependencies}
        waiting = WaitingFor(
            wake_at=row["wake_at"],
            signal=row["wait_signal"],
            children=sum(1 for i in awaited if i in mine),
            dependencies=sum(1 for i in awaited if i in after),
            jobs=awaited,
        )
    return WorkflowSide(
        parent_id=row["parent_id"],
        steps=msgspec.json.decode(row["steps"], type=list[RecordedStep]),
        signals=msgspec.json.decode(row["signals"], type=list[SentSignal]),
        children=children,
        dependencies=dependencies,
        waiting_for=waiting,
    )
