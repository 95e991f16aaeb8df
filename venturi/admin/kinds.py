"""An operator's calls on kinds: pause them across every worker (running jobs finish;
no worker claims the kind until it is resumed), resume them, list them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from venturi import db, validate
from venturi.admin.common import check_kinds, operator_identity
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA

# What venturi.admin exports from here.
__all__ = [
    "KindState",
    "Paused",
    "PausedKind",
    "list_kinds",
    "pause_kinds",
    "paused_kinds",
    "resume_kinds",
    "unknown_kinds",
]


class PausedKind(msgspec.Struct, frozen=True):
    """A paused kind: when, by whom, why (``reason`` may be empty)."""

    kind: str
    paused_at: datetime
    paused_by: str | None
    reason: str | None


class KindState(msgspec.Struct, frozen=True):
    """A kind the database knows (a job, a schedule or a registered worker has it, or it
    is paused) and whether it is paused: when, by whom, why (None when it is not)."""

    kind: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    reason: str | None


class Paused(msgspec.Struct, frozen=True):
    """What ``pause_kinds`` did: the kinds now paused (with the reason each holds), and
    those of the kinds asked that no job or schedule has (most often a typo: they are
    paused all the same, as a kind may be paused before it is deployed)."""

    kinds: list[PausedKind]
    unknown: list[str]


async def pause_kinds(
    conn: Conn,
    kinds: Sequence[str],
    *,
    reason: str = "",
    operator: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> Paused:
    """Leave ``kinds`` out of every worker's claim until resumed; running jobs finish.
    A kind paused already keeps its pause's time; a ``reason`` replaces its reason and
    who paused it, an empty one keeps both."""
    kinds = check_kinds(kinds)
    if not isinstance(reason, str) or "\x00" in reason:
        raise ConfigError(
            f"reason must be a string without NUL characters, got {validate.shown(reason)}"
        )
    who = operator or operator_identity()
    unknown = await unknown_kinds(conn, kinds, schema=schema)
    rows = await db.kinds.kind_pause(conn, schema=schema, kinds=kinds, paused_by=who, reason=reason)
    return Paused([PausedKind(**dict(r)) for r in rows], unknown)


async def unknown_kinds(
    conn: Conn, kinds: Sequence[str], *, schema: str = DEFAULT_SCHEMA
) -> list[str]:
    """Those of ``kinds`` that no job, schedule or running worker has, in the order given:
    a setting made for one (a pause, a group's cap) is legitimate before the kind is
    deployed, but is most often a misspelt kind, which it would not reach."""
    kinds = check_kinds(kinds)
    known = await db.kinds.kind_list_known(conn, schema=schema, kinds=kinds)
    return [k for k in dict.fromkeys(kinds) if k not in known]


async def resume_kinds(
    conn: Conn, kinds: Sequence[str], *, schema: str = DEFAULT_SCHEMA
) -> list[str]:
    """Let workers claim ``kinds`` again (and wake the idle ones); the kinds that were
    paused."""
    return await db.kinds.kind_resume(conn, schema=schema, kinds=check_kinds(kinds))


async def paused_kinds(conn: Conn, *, schema: str = DEFAULT_SCHEMA) -> list[PausedKind]:
    """The paused kinds: when, by whom, why."""
    return [PausedKind(**dict(r)) for r in await db.kinds.kind_paused_list(conn, schema=schema)]


async def list_kinds(conn: Conn, *, schema: str = DEFAULT_SCHEMA) -> list[KindState]:
    """Every kind the database knows, by name: those of jobs (any status), of schedules,
    of registered workers, and the paused ones; each with its pause, if any."""
    return [
        KindState(**dict(r), paused=r["paused_at"] is not None)
        for r in await db.kinds.kind_list(conn, schema=schema)
    ]
