"""Reading jobs back: ``get_job``, ``get_journal``, ``get_result``, and ``wait`` for a
job to finish."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from venturi import db, sql, validate
from venturi.codecs import decode_any
from venturi.db.drivers import Row, Steps
from venturi.errors import ConfigError, VenturiError
from venturi.priority import Priority
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import FINISHED, JobStatus, JournalEvent
from venturi.tasks import registered

if TYPE_CHECKING:
    from venturi.db.drivers import AsyncConnection, SyncConnection


class JobInfo(msgspec.Struct, frozen=True):
    """A job as stored; ``carry`` and ``result`` are decoded JSON (plain Python values)."""

    id: int
    kind: str
    status: str
    priority: Priority
    carry: Any
    attempt: int
    failures: int
    visible_at: datetime
    created_at: datetime
    finished_at: datetime | None
    result: Any
    last_error: str | None
    key: str | None = None
    max_failures: int = 0
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    claim_expires_at: datetime | None = None
    # When an operator asked the running job to stop (`venturi jobs cancel`).
    cancel_requested_at: datetime | None = None
    # The job's group (SPEC 13); None without one.
    group: str | None = None


class JournalEntry(msgspec.Struct, frozen=True):
    """One event of a job's history."""

    at: datetime
    event: str
    attempt: int
    worker: str | None
    detail: str | None


def _job_info(row: Row) -> JobInfo:
    return JobInfo(
        id=row["id"],
        kind=row["kind"],
        status=row["status"],
        priority=Priority(row["priority"]),
        carry=decode_any(row["carry"]),
        attempt=row["attempt"],
        failures=row["failures"],
        visible_at=row["visible_at"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        result=decode_any(row["result"]),
        last_error=row["last_error"],
        key=row["key"],
        max_failures=row["max_failures"],
        claimed_by=row["claimed_by"],
        claimed_at=row["claimed_at"],
        claim_expires_at=row["claim_expires_at"],
        cancel_requested_at=row["cancel_requested_at"],
        group=row["grp"],
    )


def _job_id(job_id: object) -> int:
    """A job id as the reads take it: an int (the driver read 1.5 as job 1)."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ConfigError(f"job_id must be an int, got {validate.shown(job_id)}")
    return job_id


def _get_job_steps(job_id: int) -> Steps[JobInfo | None]:
    if _job_id(job_id) > validate.BIGINT_MAX:
        return None  # no job has it (the driver refused it: "out of int64 range")
    row = yield from db.reads.job_get_steps(job_id=job_id)
    return None if row is None else _job_info(row)


async def get_job(
    conn: AsyncConnection, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> JobInfo | None:
    """The job with this id, or None. ``conn`` is any connection ``Task.enqueue`` takes."""
    return await db.drivers.run(conn, _get_job_steps(job_id), schema=schema)


def get_job_sync(
    conn: SyncConnection, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> JobInfo | None:
    """``get_job`` on any connection ``Task.enqueue_sync`` takes."""
    return db.drivers.run_sync(conn, _get_job_steps(job_id), schema=schema)


def _job_and_journal_steps(job_id: int) -> Steps[tuple[JobInfo, list[JournalEntry]] | None]:
    if _job_id(job_id) > validate.BIGINT_MAX:
        return None  # no job has it
    rows = yield from db.journal.job_get_with_journal_steps(job_id=job_id)
    if not rows:
        return None
    row = rows[0]
    written = [
        JournalEntry(
            r["entry_at"],
            r["entry_event"],
            r["entry_attempt"],
            r["entry_worker"],
            r["entry_detail"],
        )
        for r in rows
        if r["entry_at"] is not None
    ]
    merged = [JournalEntry(row["created_at"], JournalEvent.ENQUEUED, 0, None, None), *written]
    # The current claim is on the row only while it is running or once it completed; a
    # claim that ended any other way was written to the journal when it ended.
    if row["status"] in (JobStatus.CLAIMED, JobStatus.COMPLETED) and row["claimed_at"] is not None:
        merged.append(
            JournalEntry(
                row["claimed_at"], JobStatus.CLAIMED, row["attempt"], row["claimed_by"], None
            )
        )
    if row["status"] == JobStatus.COMPLETED and row["finished_at"] is not None:
        merged.append(
            JournalEntry(
                row["finished_at"], JobStatus.COMPLETED, row["attempt"], row["claimed_by"], None
            )
        )
    # Stable sort: entries with one timestamp (one transaction) keep their written order.
    merged.sort(key=lambda e: e.at)
    return _job_info(row), merged


def _get_journal_steps(job_id: int) -> Steps[list[JournalEntry]]:
    found = yield from _job_and_journal_steps(job_id)
    return [] if found is None else found[1]


async def get_journal(
    conn: AsyncConnection, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> list[JournalEntry]:
    """The job's whole history, oldest first.

    The routine entries (enqueued, the current claim, completed) are not written as
    journal rows; they are read off the job row and merged here, so the common path
    costs no extra writes.
    """
    return await db.drivers.run(conn, _get_journal_steps(job_id), schema=schema)


def get_journal_sync(
    conn: SyncConnection, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> list[JournalEntry]:
    """``get_journal`` on any connection ``Task.enqueue_sync`` takes."""
    return db.drivers.run_sync(conn, _get_journal_steps(job_id), schema=schema)


def get_job_and_journal_sync(
    conn: SyncConnection, job_id: int, *, schema: str = DEFAULT_SCHEMA
) -> tuple[JobInfo, list[JournalEntry]] | None:
    """``get_job_sync`` and ``get_journal_sync`` of one job as of one instant (one
    statement, one snapshot): the journal is the job's as it stands. None: no such job."""
    return db.drivers.run_sync(conn, _job_and_journal_steps(job_id), schema=schema)


async def get_result(conn: Any, job_id: int, *, schema: str = DEFAULT_SCHEMA) -> Any:
    """The result a completed job stored (decoded JSON), or None: when the job does not
    exist, has not completed, stored no result, or its task's ``result_ttl`` has passed.

    ``get_job`` tells these cases apart. The TTL is the one the task declares in this
    process; a kind this process does not know keeps its result until it is cleared.
    """
    if _job_id(job_id) > validate.BIGINT_MAX:
        return None  # no job has it
    row = await db.reads.job_result_get(conn, schema=schema, job_id=job_id)
    if row is None or row["status"] != JobStatus.COMPLETED or row["result"] is None:
        return None
    task = registered().get(row["kind"])
    ttl = None if task is None else task.result_ttl
    if ttl is not None and (row["finished_seconds_ago"] or 0.0) > ttl:
        return None
    return decode_any(row["result"])


async def wait(
    conn_or_pool: Any,
    job_id: int,
    timeout: float | None = None,  # noqa: ASYNC109 (the API SPEC fixes: wait(..., timeout=None))
    *,
    poll: float = 1.0,
    schema: str = DEFAULT_SCHEMA,
) -> JobInfo:
    """Wait until the job is completed, dead or cancelled, and return it as it stands.

    The job is marked as waited for, so that it notifies when it finishes (jobs no one
    waits for send nothing), and this LISTENs for that; every ``poll`` seconds it also
    reads the job, in case a notification is missed. A Pool lends one connection for the
    wait. A Connection inside an open transaction cannot hear notifications before its
    transaction ends: that one polls only. ``TimeoutError`` once ``timeout`` seconds
    have passed; ``VenturiError`` if the job does not exist (or is deleted meanwhile).
    """
    limit = None if timeout is None else validate.seconds(timeout, "timeout", allow_zero=True)
    every = validate.seconds(poll, "poll")
    deadline = None if limit is None else time.monotonic() + limit
    if db.connect.is_pool(conn_or_pool):
        async with conn_or_pool.acquire() as conn:
            return await _wait_on(conn, job_id, deadline, every, schema)
    return await _wait_on(conn_or_pool, job_id, deadline, every, schema)


async def _wait_on(
    conn: Any, job_id: int, deadline: float | None, every: float, schema: str
) -> JobInfo:
    woken = asyncio.Event()
    wanted = str(job_id)

    def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == wanted:
            woken.set()

    # LISTEN inside an open transaction takes effect only at its commit.
    listening = hasattr(conn, "add_listener") and not conn.is_in_transaction()
    channel = sql.finished_channel(schema)
    if listening:
        await conn.add_listener(channel, notified)
    try:
        if listening:
            # After LISTEN: a job finishing from here on notifies, one finished before
            # is read below.
            await db.reads.job_mark_awaited(conn, schema=schema, job_id=job_id)
        while True:
            woken.clear()
            job = await get_job(conn, job_id, schema=schema)
            if job is None:
                raise VenturiError(f"job {job_id} does not exist")
            if job.status in FINISHED:
                return job
            pause = every
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {job_id} is still {job.status}")
                pause = min(pause, left)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await woken.wait()
    finally:
        if listening:
            with contextlib.suppress(Exception):
                await conn.remove_listener(channel, notified)
