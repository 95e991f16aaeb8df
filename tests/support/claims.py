"""Claiming by hand: tests that drive the claim statement themselves (ownership, recovery,
the SQL's own behaviour) without a worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from venturi import db

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
