"""Shared rate limits: a token bucket per kind in the database."""

from __future__ import annotations

from venturi import sql
from venturi.backoff import Backoff
from venturi.db.claims import ClaimAnswer, Claimant, job_claim
from venturi.db.conn import Conn, Source
from venturi.db.health import transaction_deadlines


async def rate_take(
    conn: Conn, *, schema: str, kind: str, per_second: float, burst: int, wanted: int
) -> tuple[int, float]:
    """Refill the kind's bucket and see how many of ``wanted`` tokens it has: (granted,
    seconds until the next token)."""
    row = await conn.fetchrow(sql.statement("rate_take", schema), kind, per_second, burst, wanted)
    assert row is not None
    return int(row["granted"]), float(row["wait"])


async def rate_spend(conn: Conn, *, schema: str, kind: str, tokens: int) -> None:
    await conn.execute(sql.statement("rate_spend", schema), kind, tokens)


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
    backoff: Backoff,
    deadline: float | None = None,
) -> tuple[ClaimAnswer, float]:
    """Claim up to ``wanted`` jobs of a kind with a shared rate limit, within its bucket:
    ``rate_take``, ``job_claim``, ``rate_spend`` in one transaction. Returns the claim and,
    when the bucket was empty, the seconds until its next token. With ``deadline``
    (seconds) the server ends the transaction's statements, and the transaction if it
    sits idle, after that long: its row locks on the bucket and the jobs never outlive a
    client that stopped answering."""
    async with source.acquire() as conn, conn.transaction():
        if deadline is not None:
            await transaction_deadlines(conn, schema=schema, deadline=deadline)
        granted, wait = await rate_take(
            conn, schema=schema, kind=kind, per_second=per_second, burst=burst, wanted=wanted
        )
        if granted < 1:
            return ClaimAnswer([], set(), []), max(wait, 0.001)
        answer = await job_claim(
            conn,
            schema=schema,
            claimant=claimant,
            kinds=[kind],
            leases=[lease],
            floor=0,
            limit=granted,
            backoff=backoff,
        )
        if answer.claimed:
            await rate_spend(conn, schema=schema, kind=kind, tokens=len(answer.claimed))
        return answer, 0.0
