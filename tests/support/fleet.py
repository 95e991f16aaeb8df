"""The registry of workers in tests: a worker silent for a while, seeded with SQL instead
of waited for (like ``expire_claim``)."""

from __future__ import annotations

from typing import Any

from venturi import sql


async def silence_worker(
    conn: Any, worker_id: Any, seconds: float, *, schema: str = sql.DEFAULT_SCHEMA
) -> None:
    """Make worker ``worker_id``'s last heartbeat ``seconds`` ago: the state a worker
    that was killed leaves behind once that long has passed."""
    done = await conn.execute(
        f'UPDATE "{schema}".workers SET heartbeat_at = now() - make_interval(secs => $2) '
        "WHERE id = $1",
        worker_id,
        float(seconds),
    )
    assert done == "UPDATE 1", f"worker {worker_id} is not registered"


async def stop_long_ago(
    conn: Any, worker_id: Any, seconds: float, *, schema: str = sql.DEFAULT_SCHEMA
) -> None:
    """Make worker ``worker_id`` one that stopped ``seconds`` ago."""
    done = await conn.execute(
        f'UPDATE "{schema}".workers SET stopped_at = now() - make_interval(secs => $2), '
        "heartbeat_at = now() - make_interval(secs => $2) WHERE id = $1",
        worker_id,
        float(seconds),
    )
    assert done == "UPDATE 1", f"worker {worker_id} is not registered"
