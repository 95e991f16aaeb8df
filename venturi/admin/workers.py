"""An operator's calls on the registry of workers: list them (live, gone, stopped), the
claims they hold, and recover the claims of one that is gone, or every expired claim."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import msgspec

from venturi import db, validate
from venturi.admin.common import Change, operator_identity
from venturi.backoff import DEFAULT_BACKOFF
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import DEFAULT_LIVENESS, JobStatus

# What venturi.admin exports from here.
__all__ = [
    "CLAIMED_SHOWN",
    "ClaimedJob",
    "GoneClaims",
    "RecoveredWorker",
    "WorkerInfo",
    "claimed_jobs",
    "gone_with_claims",
    "holder_of",
    "list_workers",
    "recover_expired",
    "recover_worker",
]

# The most claimed jobs the dashboard's workers page lists (claims are bounded by the
# fleet's concurrency).
CLAIMED_SHOWN = 2000


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


class ClaimedJob(msgspec.Struct, frozen=True):
    """A job some worker holds now (the dashboard's workers page lists them per worker)."""

    id: int
    kind: str
    claimed_by: str | None
    claim_token: uuid.UUID | None
    claimed_at: datetime | None
    claim_expires_at: datetime | None
    attempt: int
    cancel_requested_at: datetime | None


async def claimed_jobs(
    conn: Conn, *, limit: int = CLAIMED_SHOWN, schema: str = DEFAULT_SCHEMA
) -> list[ClaimedJob]:
    """The claimed jobs, at most ``limit`` of them."""
    rows = await db.dashboard.job_list_claimed(conn, schema=schema, limit=limit)
    return [ClaimedJob(**dict(r)) for r in rows]


class GoneClaims(msgspec.Struct, frozen=True):
    """A gone worker that still holds claims: the worker and how many of each kind."""

    worker: WorkerInfo
    kinds: dict[str, int]


async def gone_with_claims(
    conn: Conn, *, liveness: float = DEFAULT_LIVENESS, schema: str = DEFAULT_SCHEMA
) -> list[GoneClaims]:
    """Every gone worker that still holds claims (the dashboard's warning), with its
    claims counted by kind; their jobs wait for their leases' expiry, or for
    ``recover_worker``."""
    gone = [
        w
        for w in await list_workers(conn, liveness=liveness, schema=schema)
        if w.state == "gone" and w.claims and w.id is not None
    ]
    if not gone:
        return []
    per: dict[uuid.UUID, dict[str, int]] = {}
    for c in await claimed_jobs(conn, schema=schema):
        if c.claim_token is not None:
            kinds = per.setdefault(c.claim_token, {})
            kinds[c.kind] = kinds.get(c.kind, 0) + 1
    return [GoneClaims(w, dict(sorted(per.get(w.id, {}).items()))) for w in gone if w.id]


async def holder_of(
    conn: Conn, job_id: int, *, liveness: float = DEFAULT_LIVENESS, schema: str = DEFAULT_SCHEMA
) -> WorkerInfo | None:
    """The registered worker run holding claimed job ``job_id`` (None: not claimed, or
    its holder is not in the registry)."""
    token = next(
        (c.claim_token for c in await claimed_jobs(conn, schema=schema) if c.id == job_id), None
    )
    if token is None:
        return None
    found = await list_workers(conn, liveness=liveness, match=str(token), schema=schema)
    return next((w for w in found if w.id == token), None)


class RecoveredWorker(msgspec.Struct, frozen=True):
    """What ``recover_worker`` did: the worker, as it was, and its claims it recovered
    (each ``id``, ``kind``, ``status`` now: pending, dead or cancelled)."""

    worker: WorkerInfo
    jobs: list[Change]


async def _one_worker(conn: Conn, worker: str, liveness: float, schema: str) -> WorkerInfo:
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
    return found[0]


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
    if not validate.storable(worker):
        raise ConfigError(
            "worker must be a string without NUL characters or lone surrogates, "
            f"got {validate.shown(worker)}"
        )
    w = await _one_worker(conn, worker, liveness, schema)
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
            JobStatus.CLAIMED,
            r["status"],
        )
        for r in rows
    ]
    return RecoveredWorker(w, jobs)


async def recover_expired(conn: Conn, *, recoverer: str, schema: str = DEFAULT_SCHEMA) -> list[Any]:
    """Return every expired claim to pending now (the manual stale sweep; each counts as
    a failed execution, with the job's backoff); the rows recovered (``id``, ``kind``,
    ``status``, ``claimed_by``), journaled with ``recoverer``."""
    # Jobs carry their task's backoff; DEFAULT_BACKOFF is for tasks that declared none.
    return list(
        await db.claims.job_recover_stale(
            conn, schema=schema, recoverer=recoverer, backoff=DEFAULT_BACKOFF
        )
    )
