"""Global caps: at most N jobs of a kind claimed across every worker together."""

from __future__ import annotations

from typing import Any, NamedTuple

from venturi import sql
from venturi.db.conn import Conn, Record
from venturi.db.connect import transaction
from venturi.db.jobs import Claimant
from venturi.db.rates import rate_spend, rate_take


class CappedClaim(NamedTuple):
    """What ``claim_within_cap`` did: the rows it claimed; how many jobs of the kind are
    claimed once it committed (``held``, every worker's); seconds until a shared rate
    limit's next token when its bucket was empty (else 0)."""

    claimed: list[Record]
    held: int
    wait: float


async def kind_cap_lock(conn: Conn, *, schema: str, kind: str) -> None:
    await conn.execute(sql.statement("kind_cap_lock", schema), kind)


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
    """Claim up to ``limit`` jobs of ``kind`` within its global cap (after
    ``kind_cap_lock`` in the same transaction): the rows, and the kind's claims after."""
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
) -> CappedClaim:
    """Claim up to ``wanted`` jobs of a kind with a global cap: ``kind_cap_lock`` and
    ``job_claim_capped`` in one transaction (the lock must come first, in a statement of
    its own, for the claim's snapshot to see every committed claim of the kind). With a
    shared rate limit ``rate`` (per_second, burst), ``rate_take`` and ``rate_spend``
    join the transaction, after the cap lock, so every worker takes the locks in one
    order. ``source`` is a pool (the worker's held connection) or a Connection."""
    async with transaction(source) as conn:
        await kind_cap_lock(conn, schema=schema, kind=kind)
        if rate is not None:
            granted, wait = await rate_take(
                conn, schema=schema, kind=kind, per_second=rate[0], burst=rate[1], wanted=wanted
            )
            if granted < 1:
                return CappedClaim([], 0, max(wait, 0.001))
            wanted = granted
        claimed, held = await job_claim_capped(
            conn,
            schema=schema,
            claimant=claimant,
            kind=kind,
            lease=lease,
            limit=wanted,
            global_cap=global_cap,
        )
        if rate is not None and claimed:
            await rate_spend(conn, schema=schema, kind=kind, tokens=len(claimed))
        return CappedClaim(claimed, held, 0.0)
