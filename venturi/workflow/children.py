"""``ctx.spawn``, ``ctx.gather`` and ``ctx.result_of``: child jobs and Workflow
dependencies, whose results decode as their task's ``result`` type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from venturi import db
from venturi.errors import ChildFailed, DuplicateJob, VenturiError
from venturi.kinds import Declared, declared
from venturi.priority import Priority
from venturi.status import JobStatus
from venturi.traceparent import current_traceparent
from venturi.workflow.records import decode
from venturi.workflow.run import WorkflowRun
from venturi.workflow.spawn_writes import Unwritten
from venturi.workflow.suspend import Suspend

R = TypeVar("R")


class Child(Generic[R]):
    """A child job spawned by ``ctx.spawn``: its ``job_id`` and ``task`` (whose
    ``result`` type its result decodes as, in ``ctx.gather``)."""

    __slots__ = ("job_id", "task")

    def __init__(self, job_id: int, task: Any) -> None:
        self.job_id = job_id
        self.task = task

    def __repr__(self) -> str:
        return f"<venturi.Child job {self.job_id} ({self.task.kind})>"


_UNFINISHED = (JobStatus.PENDING, JobStatus.CLAIMED, JobStatus.WAITING)
# Ids a run draws at its first unkeyed spawn, for it and those after it (a fan-out of up
# to this many is written by one statement); those a run does not use stay unused, a gap
# in the jobs' ids like a rolled-back insert's.
SPARE_IDS = 16


class _KeyHeld(Exception):
    """The child's key is held: roll the spawn's record back."""


async def spawn(
    run: WorkflowRun,
    name: str,
    task: Declared,
    carry: Any,
    priority: Priority | None,
    key: str | None,
    group: str | None = None,
) -> Child[Any]:
    """Enqueue a child of ``task`` once; its id is the recorded step ``name``. Without
    ``group`` the child takes its parent's (SPEC 13)."""
    if not isinstance(task, Declared):  # refused before the name is taken, as below
        raise VenturiError(f"ctx.spawn({name!r}): task must be a venturi task, got {task!r}")
    name = run.records.claim(name, "ctx.spawn")
    # The carry and group are checked before anything is written (TypeError and
    # ConfigError, as for an enqueue), in a replay too, so that a handler that catches
    # the refusal and spawns again under the name does the same in every run; refused,
    # the name stays free.
    try:
        spec = task.job(carry, priority=priority, key=key, group=group)
    except Exception:
        run.records.used.discard(name)
        raise
    steps = await run.load()
    recorded = steps.get(name)
    if recorded is not None:
        return Child(int(decode(recorded.value, int, f"spawn {name!r}")), task)
    traceparent = current_traceparent()
    if key is None:
        # Written with the spawns beside it at the handler's next suspension (or before
        # the run's next statement, or at its end), by one statement: the record and
        # the child commit together or not at all, and a fan-out is one commit (one
        # NOTIFY: PostgreSQL serializes the commits of notifying transactions, each
        # with its WAL flush). The id is drawn now, so the handle knows it at once.
        if not run.spawns.spare_ids:
            run.spawns.spare_ids = await db.workflow.job_ids_draw(
                await run.connection(), schema=run.schema, count=SPARE_IDS
            )
        child: Child[Any] = Child(run.spawns.spare_ids.pop(0), task)
        run.spawns.defer(Unwritten(name, spec, traceparent, child))
        if run.link.holding:
            # Inside a transactional step's function: written in its transaction, so the
            # child commits with the step's record or not at all.
            await run.spawns.flush()
        return child
    row = await _spawn_keyed(run, name, spec, traceparent)
    child_id = int(row["id"])
    steps[name] = db.workflow.Recorded(str(child_id), None)
    return Child(child_id, task)


async def _spawn_keyed(run: WorkflowRun, name: str, spec: Any, traceparent: str | None) -> Any:
    """A keyed spawn in a transaction: a key held by an unfinished job rolls the record
    back and raises ``DuplicateJob`` (a failed execution of the parent)."""
    row: Any = None
    try:
        async with db.connect.transaction(await run.connection()) as conn:
            row = await db.workflow.child_spawn(
                conn,
                schema=run.schema,
                parent_id=run.job_id,
                name=name,
                spec=spec,
                traceparent=traceparent,
            )
            if row["inserted"] and not row["spawned"]:
                raise _KeyHeld
    except _KeyHeld:
        raise DuplicateJob(int(row["holder"] or 0), spec.kind, spec.key) from None
    return row


async def gather(run: WorkflowRun, children: Sequence[Child[Any]]) -> list[Any]:
    """The children's results in order once all have finished; until then the job
    waits (the last child to finish wakes it). A child that ended dead or cancelled (or
    was deleted) raises ``ChildFailed``: the first such in order, once all ended."""
    for child in children:
        if not isinstance(child, Child):
            raise VenturiError(f"ctx.gather takes what ctx.spawn returned, got {child!r}")
    if not children:
        return []
    await run.load()
    seq, rows = await db.workflow.child_list(
        await run.connection(),
        schema=run.schema,
        job_id=run.job_id,
        ids=[c.job_id for c in children],
    )
    open_ids = [int(r["id"]) for r in rows if r["status"] in _UNFINISHED]
    if open_ids:
        raise Suspend(f"{len(open_ids)} children", seq, wait_for=open_ids)
    results = []
    for child, row in zip(children, rows, strict=True):
        status = row["status"]
        if status is None:
            raise ChildFailed(child.job_id, "deleted", "the child job was deleted")
        if status != JobStatus.COMPLETED:
            raise ChildFailed(child.job_id, str(status), row["last_error"])
        results.append(_result(child.task, row["result"], f"child job {child.job_id}"))
    return results


def _result(task: Declared | None, text: str | None, what: str) -> Any:
    type_ = Any if task is None else task.result_type
    if text is None:
        text = "null"
    kind = "" if task is None else f" ({task.kind})"
    return decode(text, type_, f"the result of {what}{kind}")


async def result_of(run: WorkflowRun, name: str) -> Any:
    """The result of the Workflow node ``name`` this job comes after, decoded as its
    task's ``result`` type (as plain JSON values when this process does not know it)."""
    if not isinstance(name, str) or not name:
        raise VenturiError(f"ctx.result_of: name must be a node name, got {name!r}")
    row = await db.workflow.dependency_result(
        await run.connection(), schema=run.schema, job_id=run.job_id, name=name
    )
    if row is None:
        raise VenturiError(f"ctx.result_of: job {run.job_id} comes after no node named {name!r}")
    if row["status"] is None:
        raise VenturiError(f"ctx.result_of({name!r}): job {row['id']} no longer exists")
    if row["status"] != JobStatus.COMPLETED:
        raise VenturiError(f"ctx.result_of({name!r}): job {row['id']} is {row['status']}")
    task = declared(str(row["kind"]))
    return _result(task, row["result"], f"node {name!r} (job {row['id']})")
