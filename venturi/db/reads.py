"""Reads of jobs: one job's row or result, counts, and what a drain waits on; and the
mark that makes a finished job notify its waiters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from venturi import sql
from venturi.db import drivers
from venturi.db.conn import Conn, Record
from venturi.db.drivers import Query, Row, Steps


def job_get_steps(*, job_id: int) -> Steps[Row | None]:
    """One job's row, or None."""
    rows = yield Query("job_get", (job_id,))
    return rows[0] if rows else None


async def job_get(conn: Any, *, schema: str, job_id: int) -> Row | None:
    return await drivers.run(conn, job_get_steps(job_id=job_id), schema=schema)


async def job_mark_awaited(conn: Conn, *, schema: str, job_id: int) -> None:
    """Mark an unfinished job as waited for: it notifies ``sql.finished_channel`` when it
    finishes."""
    await conn.execute(sql.statement("job_mark_awaited", schema), job_id)


async def job_counts(conn: Conn, *, schema: str, ids: Sequence[int] | None = None) -> list[Record]:
    """Jobs per kind and status (of ``ids`` only, when given)."""
    return list(await conn.fetch(sql.statement("job_counts", schema), ids))


async def job_result_get(conn: Conn, *, schema: str, job_id: int) -> Record | None:
    """kind, status, result (JSON text) and finished_seconds_ago of one job, or None."""
    return await conn.fetchrow(sql.statement("job_result_get", schema), job_id)


async def job_due_count(
    conn: Conn, *, schema: str, kinds: Sequence[str], claimed_by: str, horizon: float = 0.0
) -> int:
    """Jobs of ``kinds`` due within ``horizon`` seconds, or claimed by ``claimed_by`` and
    not yet settled."""
    return int(
        await conn.fetchval(sql.statement("job_due_count", schema), kinds, claimed_by, horizon)
    )


async def job_list_claimed_by(conn: Conn, *, schema: str, claimed_by: str) -> list[Record]:
    """The ids of the jobs whose latest claim is ``claimed_by``'s, in id order."""
    return list(await conn.fetch(sql.statement("job_list_claimed_by", schema), claimed_by))
