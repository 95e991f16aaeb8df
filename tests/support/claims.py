"""Claiming by hand: tests that drive the claim statement themselves (ownership, recovery,
the SQL's own behaviour) without a worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from venturi import db, sql

SCHEMA = "venturi"


async def claim(
    conn: Any,
    claimant: db.Claimant,
    kinds: Sequence[str],
    *,
    lease: float = 60.0,
    limit: int = 1,
    floor: int = 0,
    schema: str = SCHEMA,
) -> list[Any]:
    """The rows ``job_claim`` claims for ``claimant``: up to ``limit`` of ``kinds``, each
    kind leased for ``lease`` seconds."""
    answer = await db.claims.job_claim(
        conn,
        schema=schema,
        claimant=claimant,
        kinds=list(kinds),
        leases=[lease] * len(kinds),
        floor=floor,
        limit=limit,
    )
    return list(answer.claimed)


def is_claim(query: str) -> bool:
    """Whether ``query`` is a worker's claim of jobs without a group: ``job_claim``, or
    the idle worker's ``job_claim_one``."""
    return query in (sql.statement("job_claim"), sql.statement("job_claim_one"))


def claimed_in(rows: Sequence[Any]) -> list[Any]:
    """The claimed jobs among a claim's rows (``job_claim`` also returns the completions
    that lost their claim, ``lost = true``; ``job_claim_one``'s rows are all claims)."""
    return [r for r in rows if not r.get("lost")]
