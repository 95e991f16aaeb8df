"""The worker's claim: who claims (``Claimant``), ``job_claim`` (which also settles
completions) and ``job_claim_one`` (an idle worker's claim of one job), when the next job
becomes visible, and the stale-claim recovery (``job_recover_stale``, on the worker's own
timer and by ``venturi recover``). Kinds with a shared rate limit are claimed
within their database bucket (``claim_within_rate``: a token bucket per kind), kinds
with a global cap within it (``claim_within_cap``: at most N jobs of a kind claimed
across every worker together).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from venturi import sql
from venturi.backoff import Backoff
from venturi.db.conn import Conn, Record, Source
from venturi.db.connect import transaction
from venturi.db.enqueue import column
from venturi.db.health import transaction_deadlines
from venturi.db.held import fetch_planned


@dataclass(frozen=True)
class Claimant:
    """Who claims: ``name`` is the identity recorded on claims and in the journal
    (diagnostics only); ``token``, unique to each worker run, is what ownership compares.
    Two claimants with the same name never settle, renew or release each other's jobs."""

    name: str
    token: uuid.UUID = field(default_factory=uuid.uuid4)


class ClaimAnswer(NamedTuple):
    """What ``job_claim`` did: the rows it claimed, and the ids whose completion applied
    (the others lost their claim)."""

    claimed: list[Record]
    settled: set[int]


async def job_claim(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    floor: int,
    limit: int,
    done: Sequence[tuple[int, int, str | None]] = (),
    replan: bool = False,
    synchronous_commit: bool = True,
) -> ClaimAnswer:
    """Settle ``done`` (id, attempt, result) as completed and claim up to ``limit`` jobs
    of ``kinds``, first at priority ``floor`` or above and the rest from every tier, in
    one statement and one commit.

    On the worker loop's held connection the statement keeps its generic plan, and
    ``replan`` (the last claim came back full) lets it be planned anew against the
    table as it is now (``Held.fetch_planned``). ``synchronous_commit=False`` lets its
    transaction commit without waiting for the WAL flush (``Worker(synchronous_commit=)``);
    run inside a caller's transaction, it would apply to that whole transaction."""
    ids = [d[0] for d in done]
    rows = await fetch_planned(conn, replan=replan)(
        sql.statement("job_claim", schema),
        claimant.name,
        kinds,
        leases,
        floor,
        limit,
        ids,
        [d[1] for d in done],
        # Most handlers return nothing: a column of NULL results binds as one NULL.
        column([d[2] for d in done]),
        claimant.token,
        synchronous_commit,
    )
    claimed, settled, _ = split_answer(rows, ids)
    return ClaimAnswer(claimed, settled)


def split_answer(
    rows: list[Record], ids: list[int]
) -> tuple[list[Record], set[int], Record | None]:
    """A claim's answer (``job_claim``, ``job_claim_grouped``) taken apart in one pass,
    each row's ``lost`` read once: the claimed rows (``lost`` false), the completions of
    ``ids`` that applied (all but those answered ``lost`` true: the statements return
    only the lost ones, statements/_claim.sql.j2 ``lost_completions``), and the summary
    row (``lost`` NULL, ``job_claim_grouped``'s), or None."""
    claimed: list[Record] = []
    settled = set(ids)
    summary = None
    for r in rows:
        lost = r["lost"]
        if lost is False:
            claimed.append(r)
        elif lost:
            settled.discard(int(r["id"]))
        else:
            summary = r
    return claimed, settled, summary


async def job_claim_one(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    synchronous_commit: bool = True,
) -> tuple[list[Record], bool]:
    """Claim the first eligible job of ``kinds``, as ``job_claim`` with a limit of one,
    no completions and floor 0 would, in a statement a third the size: an idle worker's
    claim (a pickup). The claimed row (or none), and whether another job was there to
    claim."""
    rows = await conn.fetch(
        sql.statement("job_claim_one", schema),
        claimant.name,
        kinds,
        leases,
        claimant.token,
        synchronous_commit,
    )
    return rows, bool(rows) and bool(rows[0]["more"])


class NextVisible(NamedTuple):
    """What ``job_next_visible_at`` found: when the next pending job of the kinds becomes
    visible (due ones included); the earliest timer of their waiting workflows
    (``db.workflow.job_wake_due``); which of the worker's kinds have groups, and their
    earliest group wake-up still to come (SPEC 13); whether a ready group of the kinds
    has a due job (``groups_held``: at its cap, after a claim that came back short)."""

    visible_at: datetime | None
    timer_at: datetime | None
    grouped_kinds: frozenset[str]
    group_wake_at: datetime | None
    groups_held: bool = False


async def job_next_visible_at(
    conn: Conn,
    *,
    schema: str,
    kinds: Sequence[str],
    all_kinds: Sequence[str] = (),
    resting: Sequence[str] = (),
) -> NextVisible:
    """What an idle worker waits for (``NextVisible``): ``kinds`` are those it could
    claim now, ``all_kinds`` every kind it runs, ``resting`` the grouped kinds it leaves
    alone a moment (a wake-up of theirs already due counts)."""
    row = await conn.fetchrow(
        sql.statement("job_next_visible_at", schema), kinds, all_kinds, resting
    )
    if row is None:
        return NextVisible(None, None, frozenset(), None)
    return NextVisible(
        row["next_visible_at"],
        row["next_wake_at"],
        frozenset(row.get("grouped_kinds") or ()),
        row.get("next_group_wake_at"),
        bool(row.get("groups_held")),
    )


async def job_recover_stale(
    conn: Conn, *, schema: str, recoverer: str, backoff: Backoff
) -> list[Record]:
    """Recover expired claims, at most 1,000 (the oldest expiries first); ``backoff``
    applies to jobs whose task declared none. The rows recovered (``id``, ``kind``,
    ``status``, ``attempt``, ``claimed_by``)."""
    return list(
        await conn.fetch(
            sql.statement("job_recover_stale", schema),
            recoverer,
            backoff.base,
            backoff.factor,
            backoff.cap,
            backoff.jitter,
        )
    )


# --- shared rate limits: a token bucket per kind in the database --------------------


async def rate_take(
    conn: Conn, *, schema: str, kind: str, per_second: float, burst: int, wanted: int
) -> tuple[int, float]:
    """Refill the kind's bucket and see how many of ``wanted`` tokens it has: (granted,
    seconds until the next token)."""
    row = await conn.fetchrow(sql.statement("rate_take", schema), kind, per_second, burst, wanted)
    assert row is not None
    return int(row["granted"]), float(row["wait"])


async def rate_spend(
    conn: Conn, *, schema: str, kind: str, tokens: int, per_second: float
) -> float:
    """Spend ``tokens`` of the kind's bucket (a claim that took nothing spends nothing,
    and runs no statement): the seconds until it has a whole token again (0: it has
    one, or nothing was spent)."""
    if tokens < 1:
        return 0.0
    wait = await conn.fetchval(sql.statement("rate_spend", schema), kind, tokens, per_second)
    return float(wait)


async def claim_within_rate(
    source: Source,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    per_second: float,
    burst: int,
    wanted: int,
    deadline: float | None = None,
    floor: int = 0,
) -> tuple[ClaimAnswer, float]:
    """Claim up to ``wanted`` jobs of a kind with a shared rate limit, within its bucket:
    ``rate_take``, ``job_claim``, ``rate_spend`` in one transaction. Returns the claim and,
    when the bucket is empty (before the claim: then none ran; or after its spend), the
    seconds until its next token. ``floor``: the claim's priority floor (anti-starvation,
    as ``job_claim``'s). With ``deadline`` (seconds) the server ends the transaction's
    statements, and the transaction if it sits idle, after that long: its row locks on
    the bucket and the jobs never outlive a client that stopped answering."""
    async with source.acquire() as conn, conn.transaction():
        if deadline is not None:
            await transaction_deadlines(conn, schema=schema, deadline=deadline)
        granted, wait = await rate_take(
            conn, schema=schema, kind=kind, per_second=per_second, burst=burst, wanted=wanted
        )
        if granted < 1:
            return ClaimAnswer([], set()), max(wait, 0.001)
        answer = await job_claim(
            conn,
            schema=schema,
            claimant=claimant,
            kinds=[kind],
            leases=[lease],
            floor=floor,
            limit=granted,
        )
        tokens = len(answer.claimed)
        wait = await rate_spend(
            conn, schema=schema, kind=kind, tokens=tokens, per_second=per_second
        )
        return answer, wait


# --- global caps: at most N jobs of a kind claimed across every worker together ------


class CappedClaim(NamedTuple):
    """What ``claim_within_cap`` did: the rows it claimed; how many jobs of the kind are
    claimed once it committed (``held``, every worker's); seconds until a shared rate
    limit's next token when its bucket is empty, before the claim or after its spend
    (else 0)."""

    claimed: list[Record]
    held: int
    wait: float


async def job_claim_capped(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    limit: int,
    global_cap: int,
    floor: int = 0,
) -> tuple[list[Record], int]:
    """Claim up to ``limit`` jobs of ``kind`` within its global cap, in one statement
    (it takes the kind's cap lock itself), the tiers from ``floor`` first: the rows, and
    the kind's claims after."""
    rows = await conn.fetch(
        sql.statement("job_claim_capped", schema),
        claimant.name,
        kind,
        lease,
        limit,
        global_cap,
        claimant.token,
        floor,
    )
    claimed = [r for r in rows if r["id"] is not None]
    held = next(int(r["held"]) for r in rows if r["id"] is None)
    return claimed, held


async def claim_within_cap(
    source: Source,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    global_cap: int,
    wanted: int,
    rate: tuple[float, int] | None = None,
    deadline: float | None = None,
    floor: int = 0,
) -> CappedClaim:
    """Claim up to ``wanted`` jobs of a kind with a global cap: ``job_claim_capped``, one
    statement and one commit, the tiers from ``floor`` first. With a shared rate limit
    ``rate`` (per_second, burst), ``rate_take``, the claim and ``rate_spend`` run in one
    transaction (every worker takes the bucket's lock, then the cap's). ``source`` is a
    pool (the worker's held connection) or a Connection."""
    if rate is None:
        claimed, held = await job_claim_capped(
            source,
            schema=schema,
            claimant=claimant,
            kind=kind,
            lease=lease,
            limit=wanted,
            global_cap=global_cap,
            floor=floor,
        )
        return CappedClaim(claimed, held, 0.0)
    async with transaction(source) as conn:
        if deadline is not None:  # as in claim_within_rate: the server's side of it
            await transaction_deadlines(conn, schema=schema, deadline=deadline)
        granted, wait = await rate_take(
            conn, schema=schema, kind=kind, per_second=rate[0], burst=rate[1], wanted=wanted
        )
        if granted < 1:
            return CappedClaim([], 0, max(wait, 0.001))
        claimed, held = await job_claim_capped(
            conn,
            schema=schema,
            claimant=claimant,
            kind=kind,
            lease=lease,
            limit=granted,
            global_cap=global_cap,
            floor=floor,
        )
        tokens = len(claimed)
        wait = await rate_spend(conn, schema=schema, kind=kind, tokens=tokens, per_second=rate[0])
        return CappedClaim(claimed, held, wait)
