"""Operators' reads of groups (SPEC 13): ``venturi groups list | show``, why a pending
job of a group waits. Settings are written by ``venturi.set_group`` (the library's
function, on any connection), which the CLI calls too."""

from __future__ import annotations

from typing import Any

import msgspec

from venturi import db, validate
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.groups import check_group
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import DEFAULT_LIVENESS

__all__ = ["GROUP_ORDERS", "GroupState", "list_groups", "show_group"]

AT_CAP = "group at its cap"
# The orders of ``list_groups``: most pending first, or most claimed first.
GROUP_ORDERS = ("pending", "claimed")


class GroupState(msgspec.Struct, frozen=True):
    """One group of a kind: its counts, settings and, when it has pending jobs that are
    not being claimed, why (``waiting``: at its cap, paused, out of tokens)."""

    group: str
    pending: int
    claimed: int
    # The group's own cap (None: the task's group_cap, as the last claim saw it).
    cap: int | None
    task_cap: int | None
    weight: float | None
    paused: bool
    # Jobs claimed in the last minute (this minute's and the previous one's pro rata).
    recent: int
    waiting: str | None = None


def _state(row: Any) -> GroupState:
    cap = row["cap"] if row["cap"] is not None else row["task_cap"]
    waiting = None
    if row["pending"]:
        if row["paused"]:
            waiting = "group paused"
        elif cap is not None and row["claimed"] >= cap:
            waiting = AT_CAP
        elif not row["ready"] and row["out_of_tokens"]:
            waiting = "group out of tokens"
    return GroupState(
        row["grp"],
        row["pending"],
        row["claimed"],
        row["cap"],
        row["task_cap"],
        row["weight"],
        row["paused"],
        row["recent"],
        waiting,
    )


async def list_groups(
    conn: Conn,
    kind: str,
    *,
    search: str | None = None,
    limit: int = 50,
    offset: int = 0,
    schema: str = DEFAULT_SCHEMA,
    order: str = "pending",
) -> list[GroupState]:
    """The groups of ``kind`` with work or settings, most pending first (``order``
    "claimed": most claimed first); ``search``: a part of the group's name, in any case;
    ``limit`` and ``offset`` page."""
    validate.kind(kind)
    validate.integer(limit, "limit")
    validate.integer(offset, "offset", minimum=0)
    # The statement reads limit + offset rows of a ranking, an int4 sum each bound
    # passes alone: "integer out of range" from the database, naming neither.
    validate.at_most_int_max(limit + offset, "limit + offset")
    if search is not None and not validate.storable(search):
        raise ConfigError(
            f"search must be text without NUL or lone surrogates, got {validate.shown(search)}"
        )
    if order not in GROUP_ORDERS:
        raise ConfigError(
            f"order must be one of {', '.join(GROUP_ORDERS)}, got {validate.shown(order)}"
        )
    read = db.groups.group_list if order == "pending" else db.dashboard.group_list_by_claimed
    rows = await read(
        conn, schema=schema, kind=kind, search=search or None, limit=limit, offset=offset
    )
    return [_state(r) for r in rows]


async def show_group(
    conn: Conn, kind: str, group: str, *, schema: str = DEFAULT_SCHEMA
) -> GroupState | None:
    """One group of ``kind``; None if it never had a job nor a setting."""
    validate.kind(kind)
    row = await db.groups.group_get(
        conn,
        schema=schema,
        kind=kind,
        group=check_group(group, new=False),
        liveness=DEFAULT_LIVENESS,
    )
    if row is None:
        return None
    state = _state(row)
    if state.waiting == AT_CAP and (row["gone"] or row["expired"]):
        state = msgspec.structs.replace(state, waiting=AT_CAP + _held(row))
    return state


def _held(row: Any) -> str:
    """Why a group at its cap is not busy: the claims no running handler will settle, and
    what frees them (the stale sweep runs on every worker; the lease of a worker that
    stopped running runs on, 15 minutes by default, unless it is recovered)."""
    n, them = row["gone"], "it" if row["gone"] == 1 else "them"
    if n:
        who = [w[:8] for w in row["gone_workers"]]
        holders = f"worker {who[0]}" if len(who) == 1 else "workers " + ", ".join(who)
        recover = " and ".join(f"venturi recover --worker {w}" for w in who)
        return (
            f"; {n} of its claims {'is' if n == 1 else 'are'} held by {holders}, no longer "
            f"running ({recover} {'frees' if len(who) == 1 else 'free'} {them})"
        )
    n, them = row["expired"], "it" if row["expired"] == 1 else "them"
    leases = "its lease" if n == 1 else "their leases"
    return (
        f"; {n} of its claims {'is' if n == 1 else 'are'} past {leases} "
        f"(the next stale sweep or venturi recover frees {them})"
    )
