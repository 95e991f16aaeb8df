"""Statements on the journal: the written history of a job's executions."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn, Record
from venturi.db.schema import needs_schema


@needs_schema
async def journal_get(conn: Conn, *, schema: str, job_id: int) -> list[Record]:
    """The job's written journal rows, oldest first."""
    return list(await conn.fetch(sql.statement("journal_get", schema), job_id))
