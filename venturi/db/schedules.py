"""Statements on cron schedules: the last slot each schedule handled."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from venturi import sql
from venturi.db.conn import Conn, Record


async def schedule_list(
    conn: Conn, *, schema: str, names: Sequence[str], kinds: Sequence[str] = ()
) -> list[Record]:
    """One row per name: name, last_slot (None if never seen), expression, tz and
    defined_at (when that definition was written; None: not known), paused
    (whether its kind, ``kinds[i]`` for ``names[i]``, is paused) and the database's now."""
    return list(await conn.fetch(sql.statement("schedule_list", schema), list(names), list(kinds)))


async def schedule_init(
    conn: Conn,
    *,
    schema: str,
    name: str,
    slot: datetime,
    expression: str | None = None,
    tz: str | None = None,
) -> None:
    """Record a new schedule as having handled ``slot`` of ``expression`` read in ``tz``
    (None: not known, taken on by the next check); no-op when it is known."""
    await conn.execute(sql.statement("schedule_init", schema), name, slot, expression, tz)


async def schedule_redefine(
    conn: Conn,
    *,
    schema: str,
    name: str,
    slot: datetime,
    expression: str,
    tz: str,
    started: datetime,
) -> Record | None:
    """Give the schedule this definition if its row has another, written at or before
    ``started`` (a later one is a newer deploy's: it stays): one it had (the row's
    ``expression`` and ``tz``) starts it over at ``slot``; none (None, an older version's
    row) keeps its latest slot. None when the row has it already, or a later one."""
    return await conn.fetchrow(
        sql.statement("schedule_redefine", schema), name, slot, expression, tz, started
    )


async def schedule_advance_if_behind(
    conn: Conn, *, schema: str, name: str, slot: datetime
) -> datetime | None:
    """Move the schedule to ``slot`` if it is behind; the slot it had, as the row lock
    found it, when this caller moved it (and so must enqueue the slot's job in the same
    transaction), None when it was not behind."""
    row = await conn.fetchrow(sql.statement("schedule_advance_if_behind", schema), name, slot)
    return None if row is None else row["previous"]
