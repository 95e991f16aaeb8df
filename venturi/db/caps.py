"""Global caps: at most N jobs of a kind claimed across every worker together."""

from __future__ import annotations

from typing import Any, NamedTuple

from venturi import sql
from venturi.db.claims import Claimant
from venturi.db.conn import Conn, Record
from venturi.db.connect import transaction
from venturi.db.health import transaction_deadlines
from venturi.db.rates import rate_spend, rate_take


class CappedClaim(NamedTuple):
    """What ``claim_within_cap`` did: the rows it claimed; how many jobs of the kind are
    claimed once it committed (``held``, every worker's); seconds until a shared rate
    limit's next token when its bucket was empty (else 0)."""

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
) -> tuple[list[Record], int]:
    """Claim up to ``limit`` jobs of ``kind`` within its global cap, in one statement
    (it takes the kind's cap lock itself): the rows, and the kind's claims after."""
    rows = await conn.fetch(
        sql.statement("job_claim_capped", schema),
        claimant.name,
        kind,
        lease,
        limit,
        global_cap,
        claimant.token,
    )
    claimed = [r for r in rows if r["id"] is not None]
    held = next(int(r["held"]) for r in rows if r["id"] is None)
    return claimed, held


async def claim_within_cap(
    source: Any,
    *,
    schema: str,
    claimant: Claimant,
    kind: str,
    lease: float,
    global_cap: int,
    wanted: int,
    rate: tuple[float, int] | None = None,
    deadline: float | None = None,
) -> CappedClaim:
    """Claim up to ``wanted`` jobs of a kind with a global cap: ``job_claim_capped``, one
    statement and one commit. With a shared rate limit ``rate`` (per_second, burst),
    ``rate_take``, the claim and ``rate_spend`` run in one transaction (every worker
    takes the bucket's lock, then the cap's). ``source`` is a pool (the worker's held
    connection) or a Connection."""
    if rate is None:
        claimed, held = await job_claim_capped(
            source,
            schema=schema,
            claimant=claimant,
            kind=kind,
            lease=lease,
            limit=wanted,
            global_cap=global_cap,
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
        )
        if claimed:
            await rate_spend(conn, schema=schema, kind=kind, tokens=len(claimed))
        return CappedClaim(claimed, held, 0.0)
