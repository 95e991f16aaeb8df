"""The dashboard's reads of workflows (SPEC 12): one job's workflow side bounded however
big the workflow (``job_workflow_view``), the jobs of its graph (``workflow_graph_get``)
and the list of workflow roots paged both ways (``workflow_list_older`` / ``_newer``).
And an operator's signal (``signal_send_by_operator``). Each function runs the
template it is named after."""

from __future__ import annotations

from venturi import sql
from venturi.db.conn import Conn, Record


async def job_workflow_view(
    conn: Conn, *, schema: str, job_id: int, limit: int, cap: int
) -> Record | None:
    """The job's parent, root, wait, counts (each up to ``cap``) and its first ``limit``
    steps and signals as JSON text; None when the job does not exist."""
    return await conn.fetchrow(sql.statement("job_workflow_view", schema), job_id, limit, cap)


async def workflow_graph_get(
    conn: Conn, *, schema: str, job_id: int, drawn: int, cap: int
) -> Record:
    """The jobs reachable from the job (at most ``drawn`` of them, nearest first, as JSON
    text), the dependency edges among them, and how many were reached (up to ``cap``)."""
    row = await conn.fetchrow(sql.statement("workflow_graph_get", schema), job_id, drawn, cap)
    assert row is not None  # aggregates: always one row
    return row


async def workflow_list_older(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    before: int | None,
    limit: int,
    cap: int,
    search: str | None = None,
) -> list[Record]:
    text = sql.statement("workflow_list_older", schema)
    return list(await conn.fetch(text, status, kind, before, limit, cap, search))


async def workflow_list_newer(
    conn: Conn,
    *,
    schema: str,
    status: str | None,
    kind: str | None,
    after: int,
    limit: int,
    cap: int,
    search: str | None = None,
) -> list[Record]:
    text = sql.statement("workflow_list_newer", schema)
    return list(await conn.fetch(text, status, kind, after, limit, cap, search))


async def signal_send_by_operator(
    conn: Conn, *, schema: str, job_id: int, name: str, payload: str, operator: str
) -> Record:
    """Record an operator's signal, journaled with ``operator``: the job's kind and
    status before, whether it was recorded and whether it woke the job."""
    row = await conn.fetchrow(
        sql.statement("signal_send_by_operator", schema), job_id, name, payload, operator
    )
    assert row is not None  # one input row, always
    return row
