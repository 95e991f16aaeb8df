"""Groups (SPEC 13): the grouped claim (``job_claim_grouped``), a group's settings
(``group_set``) and the reads of ``venturi groups`` (``group_list``, ``group_get``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

from venturi import sql
from venturi.db import drivers
from venturi.db.claims import Claimant, rate_spend, rate_take, split_answer
from venturi.db.conn import Conn, Record, Source
from venturi.db.connect import transaction
from venturi.db.drivers import Query, Steps
from venturi.db.enqueue import column
from venturi.db.health import transaction_deadlines
from venturi.db.held import fetch_planned


class GroupedClaim(NamedTuple):
    """What ``job_claim_grouped`` did: the rows it claimed; the kind's claimed jobs once it
    committed (with a global cap, else None); groups it made ready without taking from
    them (groups woken or first seen that the batch had no room for), groups another
    claim held and groups it took out of the
    ready ones (each means: claim again at once, the groups behind them may have work);
    the completions that rode it and applied; with a shared rate, the seconds until the
    kind's bucket has a whole token again after the claim's spend (0: it has one); when it
    claimed nothing, the seconds until the kind's next wake-up is due (None: none)."""

    claimed: list[Record]
    held: int | None
    woken: int
    busy: int
    parked: int = 0
    settled: frozenset[int] = frozenset()
    next_token: float = 0.0
    next_wake: float | None = None


class GroupLimits(NamedTuple):
    """A task's group limits: ``cap`` (group_cap), and its ``group_rate``'s
    ``per_second`` and ``burst`` (None: none)."""

    cap: int | None
    per_second: float | None
    burst: int | None


async def job_claim_grouped(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    floor: int,
    limit: int,
    limits: GroupLimits,
    global_cap: int | None = None,
    synchronous_commit: bool = True,
    done: Sequence[tuple[int, int, str | None]] = (),
    replan: bool = False,
) -> GroupedClaim:
    """Settle ``done`` (id, attempt, result) as completed and claim up to ``limit``
    grouped jobs of ``kind`` in one statement (each group within its cap and tokens, the
    groups by virtual time), as ``job_claim`` does for the jobs without a group. With
    ``global_cap`` the caller holds the kind's cap lock (``claim_grouped``). On the worker
    loop's held connection the statement keeps its generic plan, made anew with
    ``replan`` as ``job_claim``'s (``Held.fetch_planned``)."""
    ids = [d[0] for d in done]
    rows = await fetch_planned(conn, replan=replan)(
        sql.statement("job_claim_grouped", schema),
        claimant.name,
        kind,
        lease,
        floor,
        limit,
        claimant.token,
        limits.cap,
        limits.per_second,
        limits.burst,
        global_cap,
        synchronous_commit,
        ids,
        [d[1] for d in done],
        # Most handlers return nothing: a column of NULL results binds as one NULL.
        column([d[2] for d in done]),
    )
    claimed, settled, summary = split_answer(rows, ids)
    assert summary is not None  # one row, always
    return GroupedClaim(
        claimed,
        None if summary["held"] is None else int(summary["held"]),
        int(summary["woken"]),
        int(summary["busy"]),
        int(summary["parked"]),
        frozenset(settled),
        next_wake=summary["next_wake"],
    )


async def claim_grouped(
    source: Source,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    floor: int,
    limit: int,
    limits: GroupLimits,
    global_cap: int | None = None,
    rate: tuple[float, int] | None = None,
    deadline: float | None = None,
    synchronous_commit: bool = True,
    done: Sequence[tuple[int, int, str | None]] = (),
    replan: bool = False,
) -> tuple[GroupedClaim, float]:
    """``job_claim_grouped`` with the kind's own limits: alone, one statement and one
    commit; with a shared rate ``rate`` (per_second, burst) or a ``global_cap``, in one
    transaction: ``rate_take``, the kind's cap lock (``kind_cap_lock``, the lock
    ``job_claim_capped`` takes, so that the claim's snapshot, taken after it, sees every
    claim of the kind), the claim, ``rate_spend``. A limit that refuses a job spends
    nothing of the others: the kind's tokens are spent per job claimed, and the groups'
    slots and tokens only by the claim. Returns the claim and, when the kind's bucket was
    empty, the seconds until its next token (else 0). ``done``, completions, ride the
    claim; when the kind's bucket is empty no claim runs and none is settled (the
    claim's ``settled`` says which were)."""
    claim_of = functools.partial(
        job_claim_grouped,
        schema=schema,
        claimant=claimant,
        kind=kind,
        lease=lease,
        floor=floor,
        limits=limits,
        synchronous_commit=synchronous_commit,
        done=done,
    )
    if global_cap is None and rate is None:
        return await claim_of(source, limit=limit, replan=replan), 0.0
    async with transaction(source) as conn:
        if deadline is not None:
            await transaction_deadlines(conn, schema=schema, deadline=deadline)
        if rate is not None:
            granted, wait = await rate_take(
                conn, schema=schema, kind=kind, per_second=rate[0], burst=rate[1], wanted=limit
            )
            if granted < 1:
                return GroupedClaim([], None, 0, 0), max(wait, 0.001)
            limit = granted
        if global_cap is not None:
            await conn.execute(sql.statement("kind_cap_lock", schema), kind)
        claim = await claim_of(conn, limit=limit, global_cap=global_cap)
        if rate is not None:
            tokens = len(claim.claimed)
            wait = await rate_spend(
                conn, schema=schema, kind=kind, tokens=tokens, per_second=rate[0]
            )
            claim = claim._replace(next_token=wait)
        return claim, 0.0


async def group_kinds(conn: Conn, *, schema: str, kinds: Sequence[str]) -> frozenset[str]:
    """The kinds of ``kinds`` that have groups (a group row, or a wake-up not applied)."""
    return frozenset(await conn.fetchval(sql.statement("group_kinds", schema), list(kinds)))


class Share(NamedTuple):
    """A kind's groups with work as ``group_shares`` reads them: their summed weight (0:
    none) and the best tier among them (None: none)."""

    weights: float
    head: int | None


async def group_shares(conn: Conn, *, schema: str, kinds: Sequence[str]) -> dict[str, Share]:
    """Each kind's groups with work: summed weight and best tier (``Share``)."""
    rows = await conn.fetch(sql.statement("group_shares", schema), list(kinds))
    return {r["kind"]: Share(r["weights"], r["head"]) for r in rows}


async def group_wake_stranded(conn: Conn, *, schema: str) -> list[Record]:
    """Wake the groups that have a job visible now yet are neither ready, paused, nor due a
    wake-up (none, unless something broke the claim's rule); the groups woken."""
    return list(await conn.fetch(sql.statement("group_wake_stranded", schema)))


async def group_refill_advance(
    conn: Conn, *, schema: str, rates: dict[str, float | None]
) -> list[Record]:
    """Move forward the token wake-ups of ``rates``' kinds that a slower group_rate than
    the kind's here (None: it declares none) put later; the wake-ups moved."""
    kinds = sorted(rates)
    query = sql.statement("group_refill_advance", schema)
    return list(await conn.fetch(query, kinds, [rates[k] for k in kinds]))


def group_set_steps(
    *,
    kind: str,
    group: str,
    cap: tuple[bool, int | None],
    weight: tuple[bool, float | None],
    paused: tuple[bool, bool | None],
) -> Steps[Record]:
    """Write a group's settings; each field is (given, value). The row as written."""
    rows = yield Query("group_set", (kind, group, *cap, *weight, *paused))
    return rows[0]


async def group_set(conn: Any, *, schema: str, **fields: Any) -> Record:
    """``group_set_steps`` on an async connection (``drivers.run``)."""
    return await drivers.run(conn, group_set_steps(**fields), schema=schema)


def group_set_sync(conn: Any, *, schema: str, **fields: Any) -> Record:
    """``group_set_steps`` on a sync connection (``drivers.run_sync``)."""
    return drivers.run_sync(conn, group_set_steps(**fields), schema=schema)


async def group_list(
    conn: Conn, *, schema: str, kind: str, search: str | None, limit: int, offset: int
) -> list[Record]:
    return list(await conn.fetch(sql.statement("group_list", schema), kind, search, limit, offset))


async def group_get(
    conn: Conn, *, schema: str, kind: str, group: str, liveness: float
) -> Record | None:
    return await conn.fetchrow(sql.statement("group_get", schema), kind, group, liveness)
