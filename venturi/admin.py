"""Reads and repairs for operators: list, show, retry, cancel, statistics, retention.

The command line (``venturi jobs ...``, ``venturi stats``, ``venturi purge``,
``venturi top``) is a thin layer over these functions, and scripts may call them too.
Each runs its statements through ``venturi.db.jobs``; ``conn`` is a ``venturi.db.conn.Conn``
(an asyncpg Connection or Pool). Nothing here is on the worker's path.
"""

from __future__ import annotations

import getpass
import logging
import re
import socket
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import msgspec

from venturi import db, validate
from venturi.backoff import DEFAULT_BACKOFF
from venturi.db.conn import Conn
from venturi.errors import ConfigError, VenturiError
from venturi.jobs import JobInfo, JournalEntry, get_job, get_journal
from venturi.priority import Priority
from venturi.sql import DEFAULT_SCHEMA

KindStatsT = TypeVar("KindStatsT", "KindStats", "KindNow")

STATUSES = ("pending", "claimed", "completed", "dead", "cancelled", "waiting")
FINISHED = ("completed", "dead", "cancelled")

# The journal detail of an operator's retry. Statistics tell it apart from a handler's
# retry outcome (also journaled as 'retried') by this text.
MANUAL_RETRY = "manual retry"
CANCEL_DETAIL = "cancelled by an operator"
RUN_NOW_DETAIL = "run now"
SET_PRIORITY_DETAIL = "priority set to"

# Windows of the recent counts: `venturi stats` reports completions in the last minute,
# `venturi top` a per-second rate over the last ten seconds; both count failures over
# the last hour.
STATS_COMPLETED_WINDOW = 60.0
TOP_COMPLETED_WINDOW = 10.0
FAILURES_WINDOW = 3600.0

PURGE_BATCH = 1000

# A worker with no heartbeat for this long is gone (`venturi workers --liveness`).
DEFAULT_LIVENESS = 30.0

log = logging.getLogger("venturi.admin")


def operator_identity() -> str:
    """Who is acting, for the journal's worker column: ``operator:user@host``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "?"
    return f"operator:{user}@{socket.gethostname()}"


def _status(value: str | None, allowed: Sequence[str] = STATUSES) -> str | None:
    return None if value is None else validate.one_of(value, allowed, "status")


def _ids(ids: Iterable[int]) -> list[int]:
    out = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i < 1:
            raise ConfigError(f"job ids must be positive integers, got {i!r}")
        out.append(i)
    if not out:
        raise ConfigError("give at least one job id")
    return out


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds from ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or combinations (``1h30m``)."""
    cleaned = text.strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(cleaned):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not cleaned or pos != len(cleaned):
        raise ConfigError(
            f"a duration is a number with a unit s, m, h, d or w (7d, 12h, 1h30m), got {text!r}"
        )
    return total


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


async def list_jobs(
    conn: Conn,
    *,
    status: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    key: str | None = None,
    before: int | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[JobRow]:
    """The newest jobs first, optionally of one status, one kind and one exact key;
    ``before`` (an id) pages on: only older jobs, the cursor of the next page."""
    _status(status)
    validate.integer(limit, "limit")
    if before is not None:
        _ids([before])
    rows = await db.jobs.job_list(
        conn, schema=schema, status=status, kind=kind, limit=limit, key=key, before=before
    )
    return [JobRow(**dict(r)) for r in rows]


class JobDetail(msgspec.Struct, frozen=True):
    """``venturi jobs show``: the job (carry and result decoded) and its merged history."""

    job: JobInfo
    journal: list[JournalEntry]


async def show_job(conn: Conn, job_id: int, *, schema: str = DEFAULT_SCHEMA) -> JobDetail | None:
    """The job and its journal (``venturi.get_journal``, oldest first), or None."""
    job = await get_job(conn, job_id, schema=schema)
    if job is None:
        return None
    return JobDetail(job, await get_journal(conn, job_id, schema=schema))


# --- retry and cancel -----------------------------------------------------------------


class Change(msgspec.Struct, frozen=True):
    """What an operator's retry or cancel did to one job; ``done`` False is a refusal."""

    id: int
    done: bool
    message: str
    kind: str | None = None
    was: str | None = None
    now: str | None = None


async def retry_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Dead or cancelled jobs go back to pending, visible now, with a fresh failure budget,
    journaled as ``retried`` (detail ``manual retry``). Other jobs are refused, each with
    a message saying why; one result per distinct id, in id order."""
    wanted = sorted(set(_ids(ids)))
    who = operator or operator_identity()
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


async def _retry(conn: Conn, ids: list[int], who: str, schema: str) -> list[Change]:
    results: dict[int, Change] = {}
    todo = ids
    # A job changed by someone else between the statement's snapshot and its update is
    # reported as neither retried nor refused; ask again for those (rare, and bounded).
    for _ in range(3):
        again = []
        for r in await db.jobs.job_retry_many_if_dead_or_cancelled(
            conn, schema=schema, ids=todo, operator=who, detail=MANUAL_RETRY
        ):
            job_id, kind, was = r["id"], r["kind"], r["was"]
            if was is None:
                results[job_id] = Change(job_id, False, f"job {job_id} does not exist")
            elif r["retried"]:
                results[job_id] = Change(
                    job_id, True, f"job {job_id} ({kind}): {was} -> pending", kind, was, "pending"
                )
            elif r["key_holder"] is not None:
                results[job_id] = Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) cannot be retried: unfinished job "
                    f"{r['key_holder']} holds its key; wait for it or cancel it first",
                    kind,
                    was,
                )
            elif was not in ("dead", "cancelled"):
                results[job_id] = Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) is {was}: only dead or cancelled jobs can be retried",
                    kind,
                    was,
                )
            else:
                again.append(job_id)
        if not again:
            break
        todo = again
    for job_id in todo:
        results.setdefault(
            job_id, Change(job_id, False, f"job {job_id} kept changing while retrying it")
        )
    return [results[i] for i in sorted(results)]


async def cancel_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Pending jobs become cancelled now (journaled ``cancelled``). For a claimed job the
    request is recorded (``cancel_requested_at``) and the worker holding it settles it;
    finished jobs are refused. One result per distinct id, in id order."""
    wanted = sorted(set(_ids(ids)))
    who = operator or operator_identity()
    results: dict[int, Change] = {}
    todo = wanted
    for _ in range(3):
        again = []
        for r in await db.jobs.job_cancel_many(
            conn, schema=schema, ids=todo, operator=who, detail=CANCEL_DETAIL
        ):
            job_id, kind, was, action = r["id"], r["kind"], r["was"], r["action"]
            if was is None:
                results[job_id] = Change(job_id, False, f"job {job_id} does not exist")
            elif action == "cancelled":
                results[job_id] = Change(
                    job_id,
                    True,
                    f"job {job_id} ({kind}): {was} -> cancelled",
                    kind,
                    was,
                    "cancelled",
                )
            elif action == "requested":
                results[job_id] = Change(
                    job_id,
                    True,
                    f"job {job_id} ({kind}): claimed by {r['claimed_by']}; cancel requested, "
                    "its worker settles it",
                    kind,
                    was,
                    "claimed",
                )
            elif was in FINISHED:
                results[job_id] = Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) is {was}: only pending or claimed jobs can be "
                    "cancelled",
                    kind,
                    was,
                )
            else:
                again.append(job_id)  # claimed or settled between snapshot and update
        if not again:
            break
        todo = again
    for job_id in todo:
        results.setdefault(
            job_id, Change(job_id, False, f"job {job_id} kept changing while cancelling it")
        )
    return [results[i] for i in sorted(results)]


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
    wanted = sorted(set(_ids(ids)))
    who = operator or operator_identity()
    results = []
    for r in await db.jobs.job_delete_many_if_not_claimed(conn, schema=schema, ids=wanted):
        job_id, kind, was = r["id"], r["kind"], r["was"]
        if was is None:
            results.append(Change(job_id, False, f"job {job_id} does not exist"))
        elif r["deleted"]:
            log.info("job %d (%s, %s) deleted by %s", job_id, kind, was, who)
            results.append(
                Change(job_id, True, f"job {job_id} ({kind}): {was} -> deleted", kind, was)
            )
        elif was == "claimed":
            results.append(
                Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) is claimed: a running job cannot be deleted; "
                    "cancel it first",
                    kind,
                    was,
                )
            )
        else:
            # Deleted by someone else, or claimed, after the statement's snapshot.
            results.append(
                Change(job_id, False, f"job {job_id} ({kind}) changed while deleting it", kind, was)
            )
    return results


async def run_now_jobs(
    conn: Conn,
    ids: Iterable[int],
    *,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[Change]:
    """Pending jobs scheduled for later become visible now (journaled ``released``, detail
    ``run now``, with the operator) and idle workers of their kind are woken; jobs already
    due and jobs in any other status are refused. One result per distinct id, in id order."""
    wanted = sorted(set(_ids(ids)))
    who = operator or operator_identity()
    results = []
    rows = await db.jobs.job_run_now_many_if_pending(
        conn, schema=schema, ids=wanted, operator=who, detail=RUN_NOW_DETAIL
    )
    for r in rows:
        job_id, kind, was = r["id"], r["kind"], r["was"]
        if was is None:
            results.append(Change(job_id, False, f"job {job_id} does not exist"))
        elif r["moved"]:
            results.append(
                Change(job_id, True, f"job {job_id} ({kind}): visible now", kind, was, was)
            )
        elif was == "pending":
            results.append(
                Change(job_id, False, f"job {job_id} ({kind}) is already due", kind, was)
            )
        else:
            results.append(
                Change(
                    job_id,
                    False,
                    f"job {job_id} ({kind}) is {was}: only pending jobs can be run now",
                    kind,
                    was,
                )
            )
    return results


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
    wanted = sorted(set(_ids(ids)))
    who = operator or operator_identity()
    name = tier.name.lower()
    results = []
    rows = await db.jobs.job_set_priority_many_if_pending(
        conn,
        schema=schema,
        ids=wanted,
        priority=int(tier),
        operator=who,
        detail=f"{SET_PRIORITY_DETAIL} {name}",
    )
    for r in rows:
        job_id, kind, was = r["id"], r["kind"], r["was"]
        if was is None:
            results.append(Change(job_id, False, f"job {job_id} does not exist"))
        elif r["moved"]:
            before = Priority(r["was_priority"]).name.lower()
            results.append(
                Change(job_id, True, f"job {job_id} ({kind}): {before} -> {name}", kind, was, was)
            )
        elif was == "pending" and r["was_priority"] == int(tier):
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


def parse_priority(value: Priority | str) -> Priority:
    """A ``Priority`` from itself or its name (high, normal, low; any case)."""
    if isinstance(value, Priority):
        return value
    if isinstance(value, str) and value.strip().upper() in Priority.__members__:
        return Priority[value.strip().upper()]
    raise ConfigError(f"priority must be one of high, normal, low, got {value!r}")


# --- statistics -----------------------------------------------------------------------


class KindStats(msgspec.Struct, frozen=True):
    """``venturi stats``, one kind. ``due`` pending jobs may run now, ``scheduled`` ones
    later; ``oldest_due_seconds`` is how long the longest-waiting due job has been
    claimable; ``expired`` claims await recovery."""

    kind: str
    due: int
    scheduled: int
    claimed: int
    expired: int
    completed: int
    dead: int
    cancelled: int
    oldest_due_seconds: float | None
    completed_recent: int
    failures_recent: int
    # An operator paused the kind (`venturi kinds pause`): no worker claims it.
    paused: bool = False
    # Due jobs wait and no live worker registers the kind: nobody will run them.
    no_live_worker: bool = False


class Stats(msgspec.Struct, frozen=True):
    """Every kind's counts, the windows of the recent counts in seconds, and the
    workers that are live or gone (``liveness_seconds`` tells them apart)."""

    completed_window_seconds: float
    failures_window_seconds: float
    kinds: list[KindStats]
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
    rows = await db.jobs.job_stats(
        conn,
        schema=schema,
        manual_detail=MANUAL_RETRY,
        completed_window=completed_window,
        failures_window=failures_window,
    )
    fleet = await _fleet(conn, liveness, schema)
    kinds = [fleet.flag(KindStats(**dict(r))) for r in rows]
    return Stats(completed_window, failures_window, kinds, liveness, fleet.running)


class KindNow(msgspec.Struct, frozen=True):
    """One kind in a ``venturi top`` frame."""

    kind: str
    due: int
    scheduled: int
    claimed: int
    expired: int
    completed_recent: int
    failures_recent: int
    dead: int
    oldest_due_seconds: float | None
    paused: bool = False
    no_live_worker: bool = False


class TopFrame(msgspec.Struct, frozen=True):
    """Everything one frame of ``venturi top`` shows, read in one round of queries."""

    at: datetime
    completed_window_seconds: float
    failures_window_seconds: float
    kinds: list[KindNow]
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
    kinds = await db.jobs.job_top(
        conn,
        schema=schema,
        manual_detail=MANUAL_RETRY,
        completed_window=completed_window,
        failures_window=failures_window,
    )
    fleet = await _fleet(conn, liveness, schema)
    return TopFrame(
        datetime.now(UTC),
        completed_window,
        failures_window,
        [fleet.flag(KindNow(**dict(r))) for r in kinds],
        fleet.running,
        liveness,
    )


# --- the registry of workers ---------------------------------------------------------


class WorkerInfo(msgspec.Struct, frozen=True):
    """One worker run of ``venturi workers``: ``state`` is ``live``, ``gone`` (no heartbeat
    for the liveness), ``stopped`` (a clean stop) or ``unregistered`` (claims held under a
    token no row names: a venturi from before the registry; only name, kinds and the
    claims are known). ``id`` is the run's claim token; ``claims`` the jobs it holds."""

    id: uuid.UUID | None
    name: str
    state: str
    host: str | None
    pid: int | None
    kinds: list[str]
    concurrency: int | None
    version: str | None
    started_at: datetime | None
    heartbeat_at: datetime | None
    stopped_at: datetime | None
    heartbeat_age_seconds: float | None
    claims: int
    expired: int
    oldest_claim_at: datetime | None


async def list_workers(
    conn: Conn,
    *,
    liveness: float = DEFAULT_LIVENESS,
    match: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> list[WorkerInfo]:
    """Every registered worker run, live first, then gone, unregistered claim holders and
    stopped ones; ``match`` keeps the one whose id starts with it or whose name it is."""
    liveness = validate.seconds(liveness, "liveness")
    rows = await db.workers.worker_list(conn, schema=schema, liveness=liveness, match=match)
    return [WorkerInfo(**{**dict(r), "kinds": list(r["kinds"] or [])}) for r in rows]


class _Fleet:
    """What stats and top add to each kind and show below them."""

    def __init__(self, workers: list[WorkerInfo], paused: set[str]) -> None:
        self.running = [w for w in workers if w.state != "stopped"]
        self.served = {k for w in workers if w.state == "live" for k in w.kinds}
        self.paused = paused

    def flag(self, row: KindStatsT) -> KindStatsT:
        return msgspec.structs.replace(
            row,
            paused=row.kind in self.paused,
            no_live_worker=row.due > 0 and row.kind not in self.served,
        )


async def _fleet(conn: Conn, liveness: float, schema: str) -> _Fleet:
    workers = await list_workers(conn, liveness=liveness, schema=schema)
    paused = {str(r["kind"]) for r in await db.kinds.kind_paused_list(conn, schema=schema)}
    return _Fleet(workers, paused)


class RecoveredWorker(msgspec.Struct, frozen=True):
    """What ``recover_worker`` did: the worker, as it was, and its claims it recovered
    (each ``id``, ``kind``, ``status`` now: pending, dead or cancelled)."""

    worker: WorkerInfo
    jobs: list[Change]


async def recover_worker(
    conn: Conn,
    worker: str,
    *,
    force: bool = False,
    liveness: float = DEFAULT_LIVENESS,
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> RecoveredWorker:
    """Recover the claims of a worker that is gone at once, instead of at their leases'
    expiry: each is a failed execution (journaled ``stale-recovered``, with backoff and
    the backstop), exactly as a lease expiry. ``worker`` is its id (or a unique prefix of
    it) or its name; a live worker is refused (``ConfigError``) unless ``force``."""
    validate.non_empty_str(worker, "worker")
    found = [
        w
        for w in await list_workers(conn, liveness=liveness, match=worker, schema=schema)
        if w.id is not None
    ]
    if not found:
        raise ConfigError(f"no worker has id or name {worker!r} (see `venturi workers`)")
    if len(found) > 1:
        ids = ", ".join(f"{w.id} ({w.state})" for w in found[:5])
        raise ConfigError(f"{worker!r} names {len(found)} workers: give the id ({ids})")
    w = found[0]
    assert w.id is not None
    if w.state == "live" and not force:
        raise ConfigError(
            f"worker {w.name} ({w.id}) is live (heartbeat {w.heartbeat_age_seconds or 0:.0f}s "
            f"ago, liveness {liveness:g}s): refusing to recover its claims; pass --force "
            "if it is wedged"
        )
    who = operator or operator_identity()
    heard = "" if w.heartbeat_at is None else f"; no heartbeat since {w.heartbeat_at}"
    reason = f"worker {w.name} ({w.id}) {w.state}{heard}; its claim recovered by {who}"
    rows = await db.workers.job_recover_worker(
        conn, schema=schema, recoverer=who, backoff=DEFAULT_BACKOFF, token=w.id, reason=reason
    )
    jobs = [
        Change(
            r["id"],
            True,
            f"job {r['id']} ({r['kind']}): claimed -> {r['status']}",
            r["kind"],
            "claimed",
            r["status"],
        )
        for r in rows
    ]
    return RecoveredWorker(w, jobs)


# --- retention ------------------------------------------------------------------------


def _purge_args(status: str, older_than: float, kind: str | None) -> tuple[str, float]:
    checked = _status(status, FINISHED)
    assert checked is not None
    if isinstance(older_than, bool) or not isinstance(older_than, int | float) or older_than < 0:
        raise ConfigError(
            f"older_than must be a non-negative number of seconds, got {older_than!r}"
        )
    if kind is not None and not kind:
        raise ConfigError("kind must be a non-empty string")
    return checked, float(older_than)


async def purge_count(
    conn: Conn,
    *,
    status: str,
    older_than: float,
    kind: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """How many jobs ``purge`` would delete now."""
    st, secs = _purge_args(status, older_than, kind)
    return await db.jobs.job_purge_count(conn, schema=schema, status=st, older_than=secs, kind=kind)


async def purge(
    conn: Conn,
    *,
    status: str,
    older_than: float,
    kind: str | None = None,
    batch: int = PURGE_BATCH,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """Delete finished jobs of ``status`` that finished more than ``older_than`` seconds
    ago, ``batch`` rows per statement (each its own transaction, so locks stay short);
    their journal goes with them. Returns how many were deleted."""
    st, secs = _purge_args(status, older_than, kind)
    validate.integer(batch, "batch")
    total = 0
    while True:
        deleted = await db.jobs.job_purge_batch(
            conn, schema=schema, status=st, older_than=secs, kind=kind, batch=batch
        )
        total += deleted
        if deleted < batch:
            return total
