"""An operator's calls on jobs: list and show them; retry, cancel, delete and
re-prioritise them by id (run now and signals: ``waking``). Each action returns one
``Change`` per distinct id, in id order, and journals the operator (a deletion, whose journal goes with the job, is
logged instead, on logger ``venturi.admin``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.again import again_on_rollback, asking_again
from venturi.admin.common import (
    CANCEL_DETAIL,
    SET_PRIORITY_DETAIL,
    Change,
    check_ids,
    check_status,
    missing,
    operator_identity,
    parse_priority,
)
from venturi.admin.groups import show_group
from venturi.admin.waits import held_now, kind_waits
from venturi.admin.workflow import (
    ChildJob,
    DependencyJob,
    RecordedStep,
    SentSignal,
    WaitingFor,
    workflow_side,
)
from venturi.db.conn import Conn
from venturi.db.schema import needs_schema
from venturi.errors import VenturiError
from venturi.groups import check_group
from venturi.jobs import JobInfo, JournalEntry, get_job, get_journal
from venturi.priority import Priority
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import FINISHED, MANUAL_RETRY, JobStatus

# What venturi.admin exports from here.
__all__ = [
    "CancelChange",
    "JobDetail",
    "JobRow",
    "cancel_jobs",
    "delete_job",
    "delete_jobs",
    "list_jobs",
    "retry_jobs",
    "set_priority",
    "show_job",
]

log = logging.getLogger("venturi.admin")


# --- list and show --------------------------------------------------------------------


class JobRow(msgspec.Struct, frozen=True):
    """One line of ``venturi jobs list``: the row without its carry and result."""

    id: int
    kind: str
    status: str
    priority: int
    key: str | None
    attempt: int
    failures: int
    max_failures: int
    created_at: datetime
    visible_at: datetime
    claimed_at: datetime | None
    claimed_by: str | None
    claim_expires_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    cancel_requested_at: datetime | None
    group: str | None = None


async def list_jobs(
    conn: Conn,
    *,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    key: str | None = None,
    before: int | None = None,
    schema: str = DEFAULT_SCHEMA,
    group: str | None = None,
) -> list[JobRow]:
    """The newest jobs first, optionally of one status, one kind, one exact key and one
    group; ``before`` (an id) pages on: only older jobs, the cursor of the next page."""
    check_status(status)
    validate.integer(limit, "limit")
    if kind is not None:
        validate.kind(kind)  # a NUL failed in the driver, "invalid byte sequence"
    if before is not None:
        check_ids([before])
    if group is not None:
        check_group(group, new=False)
    # A schema not applied is the SchemaError saying what to run, as the other reads
    # say it, not the driver's "relation ... does not exist".
    rows = await needs_schema(db.operations.job_list)(
        conn,
        schema=schema,
        status=status,
        kind=kind,
        limit=limit,
        key=key,
        before=before,
        group=group,
    )
    return [JobRow(**dict(r)) for r in rows]


class JobDetail(msgspec.Struct, frozen=True):
    """``venturi jobs show``: the job (carry and result decoded), its merged history, and
    its workflow side (SPEC 12): its parent, recorded steps, signals, children and
    dependencies with their statuses, what it waits for now while waiting (None
    otherwise), and whether its kind is paused (read with the workflow side). A plain
    job has no parent and empty lists."""

    job: JobInfo
    journal: list[JournalEntry]
    parent_id: int | None = None
    steps: list[RecordedStep] = []
    signals: list[SentSignal] = []
    children: list[ChildJob] = []
    dependencies: list[DependencyJob] = []
    waiting_for: WaitingFor | None = None
    kind_paused: bool = False
    # Why a pending job of a group is not running (SPEC 13): its group at its cap,
    # paused or out of tokens; None otherwise.
    group_waits: str | None = None
    # Why a pending, due job is not running for its kind's sake (SPEC 13): the kind at
    # its cap on every live worker that runs it, at its global cap, or unserved
    # (admin.waits); None otherwise.
    kind_waits: str | None = None


async def show_job(
    conn: Conn, job_id: int, *, schema: str = DEFAULT_SCHEMA, workflow: bool = True
) -> JobDetail | None:
    """The job, its journal (``venturi.get_journal``, oldest first) and its workflow
    side, or None. ``workflow=False`` leaves the workflow side out (empty): the
    dashboard reads a bounded one of its own (``workflow_view``), since this one lists
    every step and child."""
    # Before the driver sees it: 1.5 was read as job 1 (a wrong job shown), "1" and
    # 2**63 were the driver's errors.
    [job_id] = check_ids([job_id])
    job = await get_job(conn, job_id, schema=schema)
    if job is None:
        return None
    journal = await get_journal(conn, job_id, schema=schema)
    waits = None
    # A job not yet due waits for its time, whatever its group's state.
    if job.group is not None and held_now(job):
        state = await show_group(conn, job.kind, job.group, schema=schema)
        waits = None if state is None else state.waiting
    held = await kind_waits(conn, job, schema=schema)
    side = await workflow_side(conn, job_id, schema=schema) if workflow else None
    if side is None:  # a plain read, or deleted between the reads
        return JobDetail(job, journal, group_waits=waits, kind_waits=held)
    return JobDetail(
        job,
        journal,
        parent_id=side.parent_id,
        steps=side.steps,
        signals=side.signals,
        children=side.children,
        dependencies=side.dependencies,
        waiting_for=side.waiting_for,
        kind_paused=side.kind_paused,
        group_waits=waits,
        kind_waits=held,
    )


# --- retry and cancel -----------------------------------------------------------------


# The most children (and theirs) one retry --with-children takes along with its parents.
CHILDREN_RETRIED_MAX = 10_000


async def retry_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    with_children: bool = False,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Dead or cancelled jobs go back to pending, visible now, with a fresh failure budget,
    journaled as ``retried`` (detail ``manual retry``). Other jobs are refused, each with
    a message saying why; one result per distinct id, in id order.

    A workflow parent's children that ended dead or cancelled stay as they are, and its
    replayed ``gather`` raises ``ChildFailed`` again (the message says so);
    ``with_children`` retries them too (and their own such children), each with its own
    result, so that the parent's gather waits for them again."""
    wanted = sorted(set(check_ids(ids)))
    who = operator or operator_identity()
    kids = await db.operations.job_children_failed_list(
        conn, schema=schema, ids=wanted, limit=CHILDREN_RETRIED_MAX
    )
    if with_children:
        taken = set(wanted)
        wanted = sorted(taken | {r["id"] for r in kids})
    changes = await _retry_all(conn, wanted, who, schema)
    if with_children or not kids:
        return changes
    left: dict[int, int] = {}
    for r in kids:
        if r["parent_id"] in wanted:
            left[r["parent_id"]] = left.get(r["parent_id"], 0) + 1
    return [_with_children_left(c, left.get(c.id, 0)) for c in changes]


def _with_children_left(change: Change, n: int) -> Change:
    if not change.done or not n:
        return change
    note = (
        f"; {n} of its children ended dead or cancelled and stay so: its gather raises "
        "ChildFailed again unless they are retried too (--with-children)"
    )
    return msgspec.structs.replace(change, message=change.message + note)


async def _retry_all(conn: Conn, wanted: list[int], who: str, schema: str) -> list[Change]:
    try:
        return await _retry(conn, wanted, who, schema)
    except db.errors.UNIQUE_VIOLATION:
        # Two of these jobs share a kind and key (or a job took the key meanwhile): only
        # one of them can be unfinished. Go one by one so the others still go through.
        out = []
        for job_id in wanted:
            try:
                out += await _retry(conn, [job_id], who, schema)
            except db.errors.UNIQUE_VIOLATION:
                out.append(
                    Change(
                        job_id,
                        False,
                        f"job {job_id} cannot be retried: another unfinished job of its kind "
                        "holds its key",
                    )
                )
        return out


def _retried(r: Any) -> Change | None:
    job_id, kind, was = r["id"], r["kind"], r["was"]
    if was is None:
        return missing(job_id)
    if r["retried"]:
        now = f"{r['now']}{_waiting_for(r['wait_for']) if r['wait_for'] else ''}"
        return Change(job_id, True, f"job {job_id} ({kind}): {was} -> {now}", kind, was, r["now"])
    if r["blocked_by"] is not None:
        by = r["blocked_by"]
        return Change(
            job_id,
            False,
            f"job {job_id} ({kind}) cannot be retried: it comes after job {by}, which is "
            f"{r['blocker_status']} and stays so; retry job {by} with it",
            kind,
            was,
        )
    if r["key_holder"] is not None:
        return Change(
            job_id,
            False,
            f"job {job_id} ({kind}) cannot be retried: unfinished job "
            f"{r['key_holder']} holds its key; wait for it or cancel it first",
            kind,
            was,
        )
    if was not in (JobStatus.DEAD, JobStatus.CANCELLED):
        return Change(
            job_id,
            False,
            f"job {job_id} ({kind}) is {was}: only dead or cancelled jobs can be retried",
            kind,
            was,
        )
    return None


def _waiting_for(ids: list[int]) -> str:
    """A Workflow node retried before its dependencies completed (SPEC 12)."""
    if len(ids) == 1:
        return f" for job {ids[0]} (it comes after it)"
    return f" for jobs {', '.join(map(str, ids))} (it comes after them)"


async def _retry(conn: Conn, ids: list[int], who: str, schema: str) -> list[Change]:
    async def read(todo: list[int]) -> list[Any]:
        return await db.operations.job_retry_many_if_dead_or_cancelled(
            conn, schema=schema, ids=todo, operator=who, detail=MANUAL_RETRY
        )

    return await asking_again(conn, ids, read, _retried, "retrying")


class CancelChange(Change, frozen=True):
    """A cancel's ``Change``, with what its cascade (SPEC 12) did besides: the unfinished
    children and dependents cancelled with a job cancelled here, and the claimed ones
    asked to stop (none of the ids given; each under the lowest given id reaching it)."""

    cascade_cancelled: list[int] = []
    cascade_asked: list[int] = []


def _jobs(ids: list[int]) -> str:
    shown = ", ".join(map(str, ids[:5])) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return f"job{'s' if len(ids) > 1 else ''} {shown}"


def _cancelled(r: Any) -> Change | None:
    job_id, kind, was, action = r["id"], r["kind"], r["was"], r["action"]
    if was is None:
        return missing(job_id)
    if action == JobStatus.CANCELLED:
        gone, asked = list(r["cascade_cancelled"]), list(r["cascade_requested"])
        notes = [f"cancelled {len(gone)} children or dependents ({_jobs(gone)})"] if gone else []
        notes += [f"asked {len(asked)} running to stop ({_jobs(asked)})"] if asked else []
        with_it = f"; with it, {' and '.join(notes)}" if notes else ""
        return CancelChange(
            job_id,
            True,
            f"job {job_id} ({kind}): {was} -> cancelled{with_it}",
            kind,
            was,
            JobStatus.CANCELLED,
            gone,
            asked,
        )
    if action == "requested":
        return Change(
            job_id,
            True,
            f"job {job_id} ({kind}): claimed by {r['claimed_by']}; cancel requested, "
            "its worker settles it",
            kind,
            was,
            JobStatus.CLAIMED,
        )
    if was in FINISHED:
        return Change(
            job_id,
            False,
            f"job {job_id} ({kind}) is {was}: only pending or claimed jobs can be cancelled",
            kind,
            was,
        )
    return None  # claimed or settled between snapshot and update


async def cancel_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Pending jobs become cancelled now (journaled ``cancelled``). For a claimed job the
    request is recorded (``cancel_requested_at``) and the worker holding it settles it;
    finished jobs are refused. One result per distinct id, in id order: each a
    ``CancelChange``, which also names the children and dependents the cascade cancelled
    or asked to stop with it (SPEC 12)."""
    wanted = sorted(set(check_ids(ids)))
    who = operator or operator_identity()

    async def read(todo: list[int]) -> list[Any]:
        return await db.operations.job_cancel_many(
            conn, schema=schema, ids=todo, operator=who, detail=CANCEL_DETAIL
        )

    changes = await asking_again(conn, wanted, read, _cancelled, "cancelling")
    # Every result a CancelChange, a refusal's cascade empty: one shape in --json.
    return [
        c if isinstance(c, CancelChange) else CancelChange(**msgspec.structs.asdict(c))
        for c in changes
    ]


async def delete_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Delete jobs that no worker holds, their journal with them; a claimed job is refused
    (cancel it first). The journal goes with the job, so each deletion is logged instead
    (logger ``venturi.admin``, with the operator). One result per distinct id, in id order."""
    wanted = sorted(set(check_ids(ids)))
    who = operator or operator_identity()

    def deleted(r: Any) -> Change | None:
        job_id, kind, was = r["id"], r["kind"], r["was"]
        if was is None:
            return missing(job_id)
        if r["deleted"]:
            log.info("job %d (%s, %s) deleted by %s", job_id, kind, was, who)
            return Change(job_id, True, f"job {job_id} ({kind}): {was} -> deleted", kind, was)
        if was == JobStatus.CLAIMED:
            return Change(
                job_id,
                False,
                f"job {job_id} ({kind}) is claimed: a running job cannot be deleted; "
                "cancel it first",
                kind,
                was,
            )
        # Changed after the statement's snapshot: claimed or deleted by someone else, or
        # moved to the history (the statement looked for it in the live table). Asked again.
        return None

    async def read(todo: list[int]) -> list[Any]:
        return await db.operations.job_delete_many_if_not_claimed(conn, schema=schema, ids=todo)

    return await asking_again(conn, wanted, read, deleted, "deleting")


async def delete_job(
    conn: Conn, job_id: int, *, operator: str | None = None, schema: str = DEFAULT_SCHEMA
) -> bool:
    """Delete one job no worker holds, its journal with it; True once deleted, False if
    there is no such job. A claimed job raises ``VenturiError`` (cancel it first). The
    deletion is logged with the operator (logger ``venturi.admin``): the journal goes
    with the job."""
    [change] = await delete_jobs(conn, [job_id], operator=operator, schema=schema)
    if change.done:
        return True
    if change.was is None:
        return False
    raise VenturiError(change.message)


async def set_priority(
    conn: Conn,
    ids: Iterable[int],
    priority: Priority | str,
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Pending jobs take ``priority`` (a ``Priority`` or high, normal, low), journaled
    ``released`` with the operator and the priority before; jobs in any other status
    are refused. One result per distinct id, in id order."""
    tier = parse_priority(priority)
    wanted = sorted(set(check_ids(ids)))
    who = operator or operator_identity()
    name = tier.name.lower()
    results = []
    rows = await again_on_rollback(
        conn,
        lambda: db.operations.job_set_priority_many_if_pending(
            conn,
            schema=schema,
            ids=wanted,
            priority=int(tier),
            operator=who,
            detail=f"{SET_PRIORITY_DETAIL} {name}",
        ),
        "setting priority",
    )
    for r in rows:
        job_id, kind, was = r["id"], r["kind"], r["was"]
        if was is None:
            results.append(missing(job_id))
        elif r["moved"]:
            before = Priority(r["was_priority"]).name.lower()
            results.append(
                Change(job_id, True, f"job {job_id} ({kind}): {before} -> {name}", kind, was, was)
            )
        elif was == JobStatus.PENDING and r["was_priority"] == int(tier):
            results.append(
                Change(job_id, True, f"job {job_id} ({kind}): already {name}", kind, was, was)
            )
        else:
            results.append(
                Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) is {was}: only a pending job's priority can be set",
                    kind,
                    was,
                )
            )
    return results
