"""An operator's view of the cron schedules: every schedule the database holds or this
process declares, with its last slot and, when declared here, its next slots."""

from __future__ import annotations

from datetime import datetime

import msgspec

from venturi import db
from venturi.cronspec import CronSpec
from venturi.db.conn import Conn
from venturi.errors import VenturiError
from venturi.schedules import schedules_for
from venturi.sql import DEFAULT_SCHEMA
from venturi.tasks import registered

# What venturi.admin exports from here.
__all__ = [
    "ScheduleView",
    "Schedules",
    "list_schedules",
]

NEXT_SLOTS = 5


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


class Schedules(msgspec.Struct, frozen=True):
    """The schedules by name, the database clock (None: no schedule anywhere), and a note
    (non-empty when the declared schedules could not be read)."""

    schedules: list[ScheduleView]
    now: datetime | None
    note: str


def _next_slots(spec: CronSpec, now: datetime | None) -> list[datetime]:
    slots: list[datetime] = []
    at = now
    if at is not None:
        for _ in range(NEXT_SLOTS):
            at = spec.next_after(at)
            slots.append(at)
    return slots


async def list_schedules(conn: Conn, *, schema: str = DEFAULT_SCHEMA) -> Schedules:
    """Every schedule in the database or declared in this process, by name."""
    rows = await db.dashboard.schedule_list_all(conn, schema=schema)
    now: datetime | None = rows[0]["now"] if rows else None
    note = ""
    try:
        declared = {s.name: s for s in schedules_for(registered())}
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
        out[name] = ScheduleView(
            name,
            base.last_slot,
            base.updated_at,
            s.task.kind,
            s.spec.expression,
            s.spec.tz,
            _next_slots(s.spec, now),
        )
    return Schedules([out[n] for n in sorted(out)], now, note)
