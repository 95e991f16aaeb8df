"""Statements on the registry of workers (the ``workers`` table): a run registers,
heartbeats and stops; operators list them and recover a gone one's claims; and the reads
that weigh the queue against the live workers (the queue gauges, unserved kinds)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from venturi import sql
from venturi.backoff import Backoff
from venturi.db.conn import Conn, Record


async def worker_register(
    conn: Conn,
    *,
    schema: str,
    id: uuid.UUID,
    name: str,
    host: str,
    pid: int,
    kinds: Sequence[str],
    concurrency: int,
    version: str,
    caps: Sequence[int | None] | None = None,
    global_caps: Sequence[int | None] | None = None,
) -> None:
    """Record the run; ``caps`` and ``global_caps``: each kind's limits, element for
    element with ``kinds`` (None: no such limit)."""
    await conn.execute(
        sql.statement("worker_register", schema),
        id,
        name,
        host,
        pid,
        list(kinds),
        concurrency,
        version,
        None if caps is None else list(caps),
        None if global_caps is None else list(global_caps),
    )


async def worker_heartbeat(conn: Conn, *, schema: str, id: uuid.UUID) -> bool:
    """Push the run's heartbeat forward; False when its row is missing."""
    return bool(await conn.fetchval(sql.statement("worker_heartbeat", schema), id))


async def worker_stop(conn: Conn, *, schema: str, id: uuid.UUID) -> None:
    await conn.execute(sql.statement("worker_stop", schema), id)


async def worker_prune(conn: Conn, *, schema: str, older_than: float) -> int:
    """Forget workers stopped or silent for ``older_than`` seconds; how many."""
    return int(await conn.fetchval(sql.statement("worker_prune", schema), older_than))


async def worker_list(
    conn: Conn, *, schema: str, liveness: float, match: str | None = None
) -> list[Record]:
    return list(await conn.fetch(sql.statement("worker_list", schema), liveness, match))


async def job_recover_worker(
    conn: Conn,
    *,
    schema: str,
    recoverer: str,
    backoff: Backoff,
    token: uuid.UUID,
    reason: str,
) -> list[Record]:
    """Recover every claim of one worker run, expired or not (batches of 1000 until
    none is left); ``backoff`` applies to jobs whose task declared none."""
    text = sql.statement("job_recover_worker", schema)
    out: list[Record] = []
    while True:
        rows = await conn.fetch(
            text,
            recoverer,
            backoff.base,
            backoff.factor,
            backoff.cap,
            backoff.jitter,
            token,
            reason,
        )
        out += rows
        if len(rows) < 1000:
            return out


async def queue_gauges(conn: Conn, *, schema: str, liveness: float) -> list[Record]:
    return list(await conn.fetch(sql.statement("queue_gauges", schema), liveness))


async def group_gauges(conn: Conn, *, schema: str, top: int) -> list[Record]:
    """Per kind, its busy groups' count and its ``top`` groups by pending jobs."""
    return list(await conn.fetch(sql.statement("group_gauges", schema), top))


async def kind_list_unserved(conn: Conn, *, schema: str, liveness: float) -> list[Record]:
    return list(await conn.fetch(sql.statement("kind_list_unserved", schema), liveness))


async def kind_waits(conn: Conn, *, schema: str, kind: str, liveness: float) -> Record:
    """What holds ``kind``'s pending jobs back: its live workers (``serving``), their
    tightest ``global_cap`` and the kind's ``claimed`` count, and how many of them are
    at their own cap (``at_cap``)."""
    row = await conn.fetchrow(sql.statement("kind_waits", schema), kind, liveness)
    assert row is not None  # an aggregate: always one row
    return row
