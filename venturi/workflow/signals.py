"""Signals: ``venturi.signal`` from the application, ``ctx.wait_for_signal`` in the
workflow. The first signal of a name sent to a job wins; a timeout, once reached, is
recorded, so that every later run raises ``SignalTimeout`` too (a signal arriving after
it changes nothing)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.codecs import encode_any
from venturi.errors import ConfigError, SignalTimeout
from venturi.sql import DEFAULT_SCHEMA
from venturi.workflow.records import SEP, decode, decoder
from venturi.workflow.run import WorkflowRun
from venturi.workflow.suspend import Suspend


def checked_signal(job_id: object, name: object, payload: object) -> tuple[int, str, str]:
    """The job id, the name and the payload's JSON text of a signal; ConfigError for a
    bad id or name, TypeError for a payload msgspec cannot store."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ConfigError(f"signal: job_id must be an int, got {validate.shown(job_id)}")
    if not isinstance(name, str) or not name or any(ord(c) < 32 for c in name):
        raise ConfigError(
            "signal: name must be a non-empty string without control characters, "
            f"got {validate.shown(name)}"
        )
    # The waiting handler decodes it as the type it asks for; here it must be a value
    # msgspec can store at all (TypeError before any write).
    return job_id, name, encode_any(payload, f"signal {validate.shown(name)}: the payload")


async def signal(
    conn: Any, job_id: int, name: str, payload: Any = None, *, schema: str = DEFAULT_SCHEMA
) -> bool:
    """Send signal ``name`` with ``payload`` (any msgspec-encodable value; ``TypeError``
    before any write otherwise) to workflow job ``job_id``, on any connection
    ``Task.enqueue`` takes, in the caller's transaction. True if recorded; False if a
    signal of that name was sent before (the first wins) or the job is finished or
    missing. A job waiting for it becomes claimable at once."""
    job, sig, text = checked_signal(job_id, name, payload)
    return await db.workflow.signal_send(conn, schema=schema, job_id=job, name=sig, payload=text)


def signal_sync(
    conn: Any, job_id: int, name: str, payload: Any = None, *, schema: str = DEFAULT_SCHEMA
) -> bool:
    """``signal`` on any connection ``Task.enqueue_sync`` takes."""
    job, sig, text = checked_signal(job_id, name, payload)
    return db.workflow.signal_send_sync(conn, schema=schema, job_id=job, name=sig, payload=text)


async def wait_for_signal(
    run: WorkflowRun,
    name: str,
    type_: Any,
    timeout: timedelta | float | None,  # noqa: ASYNC109
) -> Any:
    """The payload of signal ``name`` decoded as ``type_``; until it comes the job waits
    (with ``timeout``: at most that long after the first run reached this)."""
    name = run.records.claim(name, "ctx.wait_for_signal")
    what = f"signal {name!r} of job {run.job_id}"
    decoder(type_, what)  # a type msgspec cannot decode: dead now, not after the wait
    steps = await run.load()
    timed_out, deadline_name = f"{name}{SEP}timed-out", f"{name}{SEP}deadline"
    if timed_out in steps:
        raise SignalTimeout(run.job_id, name)
    seq, payload = await db.workflow.signal_get(
        await run.connection(), schema=run.schema, job_id=run.job_id, name=name
    )
    if payload is not None:
        return decode(payload, type_, what, sent=True)
    wake_at = None
    if timeout is not None:
        deadline = steps.get(deadline_name)
        if deadline is None:
            deadline = await run.record(deadline_name, "null", wake_at=run.records.after(timeout))
        wake_at = deadline.wake_at
        if wake_at is not None and wake_at <= run.records.now():
            await run.record(timed_out, "true")
            raise SignalTimeout(run.job_id, name)
    until = "" if wake_at is None else f" until {wake_at.isoformat()}"
    raise Suspend(f"signal {name!r}{until}", seq, wake_at=wake_at, signal=name)
