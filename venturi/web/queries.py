"""The dashboard's database: its pool, and the reads only the dashboard makes.

Reads shared with the command line (job lists, a job's detail, statistics, the workers
holding claims) are ``venturi.admin``'s, so the JSON API answers what ``--json`` prints.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from venturi import admin, db, sql
from venturi.errors import VenturiError
from venturi.maintenance import cron
from venturi.tasks import registered

# The charts' span, and the window of the overview's recent completions and failures.
ACTIVITY_MINUTES = 60
RECENT_WINDOW = 3600.0
# The most claimed jobs /workers lists (claims are bounded by the fleet's concurrency).
CLAIMED_SHOWN = 2000


class Database:
    """The pool the dashboard reads and acts through: the caller's, or one made from a
    DSN on first use (a mounted app gets no lifespan events of its own)."""

    def __init__(self, pool_or_dsn: Any, schema: str) -> None:
        self.schema = sql.validate_schema(schema)
        self._dsn: str | None = pool_or_dsn if isinstance(pool_or_dsn, str) else None
        self._pool: Any = None if self._dsn is not None else pool_or_dsn
        self._owned = self._dsn is not None
        self._checked = False
        self._lock = asyncio.Lock()

    async def pool(self) -> Any:
        if self._pool is not None and self._checked:
            return self._pool
        async with self._lock:
            if self._pool is None:
                assert self._dsn is not None
                self._pool = await db.connect.create_pool(self._dsn, min_size=1, max_size=4)
            if not self._checked:
                async with self._pool.acquire() as conn:
                    await db.schema.schema_version(conn, schema=self.schema)
                self._checked = True
        return self._pool

    async def close(self) -> None:
        """Close the pool if the dashboard made it."""
        if self._owned and self._pool is not None:
            await self._pool.close()
            self._pool = None
            self._checked = False

    @asynccontextmanager
    async def reading(self, *, serial: bool = True) -> AsyncIterator[asyncpg.Connection]:
        """A read-only transaction whose statements are planned with their parameters;
        ``serial``: without parallel workers (every read but a full count)."""
        pool = await self.pool()
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            await db.dashboard.dashboard_read_settings(conn, schema=self.schema)
            if serial:
                await db.dashboard.dashboard_read_serial(conn, schema=self.schema)
            yield conn

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection for an action; each statement commits on its own."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            yield conn


DATABASE_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, VenturiError)


class KindOverview(msgspec.Struct, frozen=True):
    """One kind on the overview; recent counts are over the last hour."""

    kind: str
    due: int
    scheduled: int
    claimed: int
    expired: int
    completed_recent: int
    failures_recent: int
    dead: int
    cancelled: int
    oldest_due_seconds: float | None
    paused: bool = False
    # Due jobs wait and no live worker registers the kind.
    no_live_worker: bool = False


class Paused(msgspec.Struct, frozen=True):
    kind: str
    paused_at: datetime
    paused_by: str | None
    reason: str | None


class Overview(msgspec.Struct, frozen=True):
    kinds: list[KindOverview]
    paused: list[Paused]


async def overview(conn: Any, schema: str) -> Overview:
    rows = await db.dashboard.job_overview(
        conn, schema=schema, manual_detail=admin.MANUAL_RETRY, window=RECENT_WINDOW
    )
    paused = [Paused(**dict(r)) for r in await db.kinds.kind_paused_list(conn, schema=schema)]
    names = {p.kind for p in paused}
    workers = await admin.list_workers(conn, schema=schema)
    served = {k for w in workers if w.state == "live" for k in w.kinds}
    kinds = [
        KindOverview(
            **dict(r),
            paused=r["kind"] in names,
            no_live_worker=r["due"] > 0 and r["kind"] not in served,
        )
        for r in rows
    ]
    # A paused kind with no jobs at all still belongs on the page (to resume it).
    seen = {k.kind for k in kinds}
    kinds += [
        KindOverview(p.kind, 0, 0, 0, 0, 0, 0, 0, 0, None, True)
        for p in paused
        if p.kind not in seen
    ]
    kinds.sort(key=lambda k: k.kind)
    return Overview(kinds, paused)


class Minute(msgspec.Struct, frozen=True):
    minute: datetime
    completed: int
    failures: int


async def activity(conn: Any, schema: str, minutes: int = ACTIVITY_MINUTES) -> list[Minute]:
    """Completions and failed executions per minute, oldest first, every minute present."""
    rows = await db.dashboard.job_activity_per_minute(
        conn, schema=schema, manual_detail=admin.MANUAL_RETRY, minutes=minutes
    )
    return [Minute(**dict(r)) for r in rows]


class ClaimedJob(msgspec.Struct, frozen=True):
    id: int
    kind: str
    claimed_by: str | None
    claim_token: uuid.UUID | None
    claimed_at: datetime | None
    claim_expires_at: datetime | None
    attempt: int
    cancel_requested_at: datetime | None


async def claimed_jobs(conn: Any, schema: str, limit: int = CLAIMED_SHOWN) -> list[ClaimedJob]:
    rows = await db.dashboard.job_list_claimed(conn, schema=schema, limit=limit)
    return [ClaimedJob(**dict(r)) for r in rows]


class ScheduleView(msgspec.Struct, frozen=True):
    """A schedule as the database saw it (``last_slot``) and, when it is declared in this
    process, its definition and next slots."""

    name: str
    last_slot: datetime | None
    updated_at: datetime | None
    kind: str | None = None
    cron: str | None = None
    tz: str | None = None
    next_slots: list[datetime] = []


NEXT_SLOTS = 5


async def schedules(conn: Any, schema: str) -> tuple[list[ScheduleView], datetime | None, str]:
    """Every schedule in the database or declared here, the database clock, and a note
    (non-empty when the declared schedules could not be read)."""
    rows = await db.dashboard.schedule_list_all(conn, schema=schema)
    now: datetime | None = rows[0]["now"] if rows else None
    note = ""
    try:
        declared = {s.name: s for s in cron.schedules_for(registered())}
    except VenturiError as exc:
        declared, note = {}, str(exc)
    if now is None and declared:
        # No row yet: the clock comes with the declared names' (empty) rows.
        listed = await db.schedules.schedule_list(conn, schema=schema, names=sorted(declared))
        now = listed[0]["now"]
    out: dict[str, ScheduleView] = {
        r["name"]: ScheduleView(r["name"], r["last_slot"], r["updated_at"]) for r in rows
    }
    for name, s in declared.items():
        base = out.get(name, ScheduleView(name, None, None))
        slots: list[datetime] = []
        at = now
        if at is not None:
            for _ in range(NEXT_SLOTS):
                at = s.spec.next_after(at)
                slots.append(at)
        out[name] = ScheduleView(
            name, base.last_slot, base.updated_at, s.task.kind, s.spec.expression, s.spec.tz, slots
        )
    return [out[n] for n in sorted(out)], now, note
