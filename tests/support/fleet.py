"""The registry of workers in tests: a worker silent for a while, seeded with SQL instead
of waited for (like ``expire_claim``)."""

from __future__ import annotations

from typing import Any

import venturi
from tests.support.opsdata import S, make
from venturi import db, sql


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


async def gone_worker(conn: Any, name: str, kinds: dict[str, int]) -> Any:
    """A registered worker holding ``kinds`` claims (count per kind), silent for an hour."""
    me = db.Claimant(name)
    await db.workers.worker_register(
        conn,
        schema=S,
        id=me.token,
        name=name,
        host="h",
        pid=1,
        kinds=sorted(kinds),
        concurrency=10,
        version=venturi.__version__,
    )
    for kind, n in kinds.items():
        for _ in range(n):
            await make(conn, kind, "pending")
        answer = await db.claims.job_claim(
            conn,
            schema=S,
            claimant=me,
            kinds=[kind],
            leases=[3600.0],
            floor=0,
            limit=n,
        )
        assert len(answer.claimed) == n
    await silence_worker(conn, me.token, 3600)
    return me
