"""An operator waking waiting and scheduled jobs: ``run_now_jobs`` (``venturi jobs
run-now``: a scheduled job visible now, a workflow's timer woken now, a signal's timeout
fired now only when asked) and ``send_signal`` (``venturi jobs signal``: the same record
as ``venturi.signal`` from the application, journaled with who sent it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from venturi import db
from venturi.admin.again import again_on_rollback
from venturi.admin.common import (
    RUN_NOW_DETAIL,
    Change,
    check_ids,
    missing,
    operator_identity,
)
from venturi.db.conn import Conn
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import FINISHED, JobStatus
from venturi.workflow.signals import checked_signal

__all__ = ["run_now_jobs", "send_signal"]


async def run_now_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    timeout_now: bool = False,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Pending jobs scheduled for later become visible now (journaled ``released``, detail
    ``run now``, with the operator) and idle workers of their kind are woken; a workflow
    asleep on a timer has it woken now (journaled ``woken``; its replayed sleep returns).
    A workflow waiting for a signal is refused (send the signal: ``send_signal``) unless
    ``timeout_now``: then its signal's timeout fires now and its replayed wait raises
    ``SignalTimeout``. Jobs already due and jobs in any other status are refused. One
    result per distinct id, in id order."""
    wanted = sorted(set(check_ids(ids)))
    who = operator or operator_identity()
    rows = await again_on_rollback(
        conn,
        lambda: db.operations.job_run_now_many_if_pending(
            conn,
            schema=schema,
            ids=wanted,
            operator=who,
            detail=RUN_NOW_DETAIL,
            timeout_now=bool(timeout_now),
        ),
        "running now",
    )
    return [_ran_now(r) for r in rows]


def _ran_now(r: Any) -> Change:
    job_id, kind, was, signal = r["id"], r["kind"], r["was"], r["wait_signal"]
    if was is None:
        return missing(job_id)
    if r["moved"] and was == JobStatus.WAITING and signal is not None:
        message = (
            f"job {job_id} ({kind}): waiting -> pending, the timeout of signal {signal!r} "
            "fired now (its wait raises SignalTimeout)"
        )
        return Change(job_id, True, message, kind, was, JobStatus.PENDING)
    if r["moved"] and was == JobStatus.WAITING:
        message = f"job {job_id} ({kind}): waiting -> pending, its timer woken now"
        return Change(job_id, True, message, kind, was, JobStatus.PENDING)
    if r["moved"]:
        return Change(job_id, True, f"job {job_id} ({kind}): visible now", kind, was, was)
    if was == JobStatus.PENDING:
        return Change(job_id, False, f"job {job_id} ({kind}) is already due", kind, was)
    if was == JobStatus.WAITING:
        return Change(job_id, False, _why_not_woken(job_id, kind, signal, r), kind, was)
    return Change(
        job_id,
        False,
        f"job {job_id} ({kind}) is {was}: only pending or waiting jobs can be run now",
        kind,
        was,
    )


def _why_not_woken(job_id: int, kind: str, signal: str | None, r: Any) -> str:
    head = f"job {job_id} ({kind})"
    send = f"send it with `venturi jobs signal {job_id} {signal}`"
    if signal is not None and r["wake_at"] is not None:
        return (
            f"{head} waits for signal {signal!r}: run-now does not time it out; {send}, "
            "or time it out now with --timeout-now"
        )
    if signal is not None:
        return f"{head} waits for signal {signal!r}, which has no timeout: {send}"
    return (
        f"{head} waits for {r['wait_count']} job(s) to finish, not for a timer: run-now "
        "has nothing to wake"
    )


async def send_signal(
    conn: Conn,
    job_id: int,
    name: str,
    payload: Any = None,
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> Change:
    """Send signal ``name`` with ``payload`` (any msgspec-encodable value) to job
    ``job_id``, journaled with the operator: ``woken`` when the job was waiting for it
    (pending at once), ``released`` otherwise (its run finds the signal when it waits for
    it). Refused, nothing written: a finished or missing job, or a signal of that name
    sent before (the first wins). ConfigError for a bad id or name, TypeError for a
    payload msgspec cannot store."""
    # Past PostgreSQL's bigint the driver's "out of int64 range" came back; every other
    # action on job ids says "job ids must be at most ...".
    check_ids([job_id])
    job, sig, text = checked_signal(job_id, name, payload)
    who = operator or operator_identity()
    r = await db.workflow_reads.signal_send_by_operator(
        conn, schema=schema, job_id=job, name=sig, payload=text, operator=who
    )
    kind, was = r["kind"], r["was"]
    if was is None:
        return missing(job)
    head = f"job {job} ({kind})"
    if r["woke"]:
        message = f"{head}: signal {sig!r} sent, waiting -> pending"
        return Change(job, True, message, kind, was, JobStatus.PENDING)
    if r["sent"]:
        waits = r["wait_signal"] if was == JobStatus.WAITING else None
        now = f"waits for signal {waits!r}" if waits else f"is {was}"
        message = f"{head}: signal {sig!r} sent; it {now}, and finds it when it waits for it"
        return Change(job, True, message, kind, was, was)
    if was in FINISHED:
        message = f"{head} is {was}: only an unfinished job takes a signal"
        return Change(job, False, message, kind, was)
    message = f"{head} was already sent signal {sig!r}: the first of a name wins"
    return Change(job, False, message, kind, was)
