"""Claims whose lease has already run out, seeded with SQL instead of slept for."""

from __future__ import annotations

from typing import Any

from venturi import sql


async def expire_claim(conn: Any, job_id: int, *, schema: str = sql.DEFAULT_SCHEMA) -> None:
    """Make the lease of claimed job ``job_id`` a second past: the state a worker that
    died mid-job leaves behind, for stale recovery to find at once."""
    done = await conn.execute(
        f"UPDATE \"{schema}\".jobs SET claim_expires_at = now() - interval '1 second' "
        "WHERE id = $1 AND status = 'claimed'",
        job_id,
    )
    assert done == "UPDATE 1", f"job {job_id} is not claimed"


async def make_due(conn: Any, job_id: int, *, schema: str = sql.DEFAULT_SCHEMA) -> None:
    """Make pending job ``job_id`` visible now: its backoff run out, without waiting."""
    done = await conn.execute(
        f"UPDATE \"{schema}\".jobs SET visible_at = now() WHERE id = $1 AND status = 'pending'",
        job_id,
    )
    assert done == "UPDATE 1", f"job {job_id} is not pending"


async def expire_claims(conn: Any, *, schema: str = sql.DEFAULT_SCHEMA) -> None:
    """Make the lease of every claimed job a second past."""
    await conn.execute(
        f"UPDATE \"{schema}\".jobs SET claim_expires_at = now() - interval '1 second' "
        "WHERE status = 'claimed'"
    )
