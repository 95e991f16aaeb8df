"""The worker's settlements, guarded by the claimant's token (``_if_owned``): each
applies only while this run still holds the claim, and says whether it did. Also the
heartbeat (lease renewal, cancel requests, ownership) and the release of orphans.

``conn`` is a ``Conn``: a Connection (the caller's transaction applies) or a Pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from venturi import sql
from venturi.db.claims import Claimant
from venturi.db.conn import Conn, Record


async def job_complete_many_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    results: Sequence[str | None],
    synchronous_commit: bool = True,
) -> set[int]:
    """Complete the jobs still owned; the ids that applied. ``synchronous_commit=False``
    as for ``job_claim`` (never inside a handler's own transaction)."""
    rows = await conn.fetch(
        sql.statement("job_complete_many_if_owned", schema),
        claimant.token,
        ids,
        attempts,
        results,
        synchronous_commit,
    )
    return {int(r["id"]) for r in rows}


async def job_completed_at_attempt(
    conn: Conn, *, schema: str, ids: Sequence[int], attempts: Sequence[int]
) -> set[int]:
    """Of ``ids`` (run under ``attempts``), those completed at that attempt."""
    rows = await conn.fetch(sql.statement("job_completed_at_attempt", schema), ids, attempts)
    return {int(r["id"]) for r in rows}


async def job_pause_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    job_id: int,
    attempt: int,
    carry: str,
    at: datetime | None,
    after: float | None,
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_pause_if_owned", schema),
        claimant.token,
        job_id,
        attempt,
        carry,
        at,
        after,
    )
    return row is not None


async def job_fail_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    job_id: int,
    attempt: int,
    event: str,
    error: str,
    carry: str | None,
    delay: float,
    force_dead: bool,
    dead_reason: str | None = None,
) -> str | None:
    """Settle a failed execution (``event`` failed, timed-out or retried); returns the new
    status (pending or dead), or None if the claim was lost. ``force_dead`` settles dead
    at once, journaled with ``dead_reason`` (None: the failures_to_dead reason)."""
    row = await conn.fetchrow(
        sql.statement("job_fail_if_owned", schema),
        claimant.token,
        job_id,
        attempt,
        event,
        error,
        carry,
        delay,
        force_dead,
        dead_reason,
    )
    return None if row is None else str(row["status"])


async def job_dead_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, reason: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_dead_if_owned", schema), claimant.token, job_id, attempt, reason
    )
    return row is not None


async def job_release_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_release_if_owned", schema), claimant.token, job_id, attempt, detail
    )
    return row is not None


async def job_cancel_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, job_id: int, attempt: int, detail: str
) -> bool:
    row = await conn.fetchrow(
        sql.statement("job_cancel_if_owned", schema), claimant.token, job_id, attempt, detail
    )
    return row is not None


async def job_heartbeat_if_owned(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    ids: Sequence[int],
    attempts: Sequence[int],
    leases: Sequence[float | None],
) -> list[Record]:
    """Renew due leases and read ownership and cancel requests of running jobs."""
    return list(
        await conn.fetch(
            sql.statement("job_heartbeat_if_owned", schema), claimant.token, ids, attempts, leases
        )
    )


async def job_release_orphans_if_owned(
    conn: Conn, *, schema: str, claimant: Claimant, running: Sequence[int]
) -> list[Record]:
    """Release jobs claimed with ``claimant``'s token that it is not running (a lost claim
    answer); other claimants of the same name keep theirs."""
    return list(
        await conn.fetch(
            sql.statement("job_release_orphans_if_owned", schema), claimant.token, list(running)
        )
    )
