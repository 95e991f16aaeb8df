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

# What venturi.admin exports from here.
__all__ = [
    "GRAPH_REACH_CAP",
    "STEPS_SHOWN",
    "WORKFLOW_COUNT_CAP",
    "ChildJob",
    "DependencyJob",
    "GraphJob",
    "RecordedStep",
    "SentSignal",
    "TimelineStep",
    "WaitingFor",
    "WaitingNow",
    "WorkflowGraph",
    "WorkflowView",
    "workflow_graph",
    "workflow_view",
]


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
    them ``children`` are its children (a gather), ``dependencies`` its dependencies;
    ``paused_kinds``: the paused kinds among them (those wait until resumed)."""

    wake_at: datetime | None
    signal: str | None
    children: int
    dependencies: int
    jobs: list[int]
    paused_kinds: list[str] = []


class WorkflowSide(msgspec.Struct, frozen=True):
    """The workflow side of one job (all empty for a plain job)."""

    parent_id: int | None
    steps: list[RecordedStep]
    signals: list[SentSignal]
    children: list[ChildJob]
    dependencies: list[DependencyJob]
    waiting_for: WaitingFor | None
    kind_paused: bool = False


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
            paused_kinds=list(row["paused_awaited"] or []),
        )
    return WorkflowSide(
        parent_id=row["parent_id"],
        steps=msgspec.json.decode(row["steps"], type=list[RecordedStep]),
        signals=msgspec.json.decode(row["signals"], type=list[SentSignal]),
        children=children,
        dependencies=dependencies,
        waiting_for=waiting,
        kind_paused=row["kind_paused"],
    )


# --- the dashboard's views, bounded however big the workflow ----------------------------

# Steps and signals listed on a job's page at most (the count says how many more).
STEPS_SHOWN = 200
# Steps, signals, children and dependencies are counted up to this ("10,000+" beyond):
# a parent of a million children costs a bounded read.
WORKFLOW_COUNT_CAP = 10_000
# The walk of a job's graph stops after this many jobs (a graph draws far fewer): each
# job reached costs a few index probes, and a count past it tells an operator nothing
# the children's count does not.
GRAPH_REACH_CAP = 1_000


class TimelineStep(msgspec.Struct, frozen=True):
    """A recorded step on a job's page: ``wake_at`` is a timer's (a sleep, a signal's
    deadline), None for any other step."""

    name: str
    recorded_at: datetime
    wake_at: datetime | None = None


class WaitingNow(msgspec.Struct, frozen=True):
    """What a waiting job waits for now: a timer (``wake_at``), a signal, and how many
    of the awaited jobs not yet ended are its children and its dependencies, and the
    paused kinds among them."""

    wake_at: datetime | None
    signal: str | None
    children: int
    dependencies: int
    paused_kinds: list[str] = []


class WorkflowView(msgspec.Struct, frozen=True):
    """A job's workflow side for its page, bounded: its parent and the root of its
    parents; its first ``STEPS_SHOWN`` steps and signals with their totals; how many
    children (and of them finished), dependencies and dependents it has; what it waits
    for now; whether its own kind is paused. Every total stops at ``cap``."""

    parent_id: int | None
    root_id: int
    steps: list[TimelineStep]
    steps_total: int
    signals: list[SentSignal]
    signals_total: int
    children_total: int
    children_finished: int
    dependencies_total: int
    dependents_total: int
    waiting: WaitingNow | None
    cap: int
    kind_paused: bool = False

    @property
    def in_workflow(self) -> bool:
        """Whether the job is part of a workflow (has a parent, steps, signals,
        children, dependencies or dependents, or waits: a signal wait before any step)."""
        return bool(
            self.waiting is not None
            or self.parent_id is not None
            or self.steps_total
            or self.signals_total
            or self.children_total
            or self.dependencies_total
            or self.dependents_total
        )


async def workflow_view(
    conn: Conn, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> WorkflowView | None:
    """The job's bounded workflow side (one statement), or None when it does not exist."""
    row = await db.workflow_reads.job_workflow_view(
        conn, schema=schema, job_id=job_id, limit=STEPS_SHOWN, cap=WORKFLOW_COUNT_CAP
    )
    if row is None:
        return None
    waiting = None
    if row["status"] == JobStatus.WAITING:
        waiting = WaitingNow(
            wake_at=row["wake_at"],
            signal=row["wait_signal"],
            children=row["waiting_children"],
            dependencies=row["waiting_dependencies"],
            paused_kinds=list(row["paused_awaited"] or []),
        )
    return WorkflowView(
        parent_id=row["parent_id"],
        root_id=row["root_id"],
        steps=msgspec.json.decode(row["steps"], type=list[TimelineStep]),
        steps_total=row["steps_total"],
        signals=msgspec.json.decode(row["signals"], type=list[SentSignal]),
        signals_total=row["signals_total"],
        children_total=row["children_total"],
        children_finished=row["children_finished"],
        dependencies_total=row["dependencies_total"],
        dependents_total=row["dependents_total"],
        waiting=waiting,
        cap=WORKFLOW_COUNT_CAP,
        kind_paused=row["kind_paused"],
    )


class GraphJob(msgspec.Struct, frozen=True):
    """A job of a workflow's graph."""

    id: int
    kind: str
    status: str
    parent_id: int | None


class WorkflowGraph(msgspec.Struct, frozen=True):
    """The jobs of a job's workflow nearest to it (at most ``drawn``), the edges among
    them (``(before, after)``: a parent before its child, a dependency before its
    dependent), and how many jobs the workflow holds (``reached``, up to
    ``GRAPH_REACH_CAP``; ``capped`` when it holds more)."""

    jobs: list[GraphJob]
    edges: list[tuple[int, int]]
    reached: int
    capped: bool

    @property
    def left_out(self) -> int:
        """How many of the jobs reached are not among ``jobs``."""
        return self.reached - len(self.jobs)


async def workflow_graph(
    conn: Conn, job_id: int, *, drawn: int, schema: str = DEFAULT_SCHEMA
) -> WorkflowGraph:
    """The graph of the workflow ``job_id`` belongs to: the ``drawn`` jobs nearest to it
    through parents, children and dependencies (it first), and their edges."""
    row = await db.workflow_reads.workflow_graph_get(
        conn, schema=schema, job_id=job_id, drawn=drawn, cap=GRAPH_REACH_CAP
    )
    jobs = msgspec.json.decode(row["nodes"], type=list[GraphJob])
    ids = {j.id for j in jobs}
    edges = {(j.parent_id, j.id) for j in jobs if j.parent_id in ids and j.parent_id is not None}
    edges.update(msgspec.json.decode(row["edges"], type=list[tuple[int, int]]))
    reached = int(row["reached"])
    return WorkflowGraph(jobs, sorted(edges), reached, reached >= GRAPH_REACH_CAP)
