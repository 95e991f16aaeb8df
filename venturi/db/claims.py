"""The worker's claim: who claims (``Claimant``), ``job_claim`` (which also settles
completions and recovers expired claims), when the next job becomes visible, and the
stale-claim recovery of a worker's sweep. Rate-limited and capped claims build on
``job_claim`` in ``db.rates`` and ``db.caps``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from venturi import sql
from venturi.backoff import Backoff
from venturi.db.conn import Conn, Record
from venturi.db.held import Held


@dataclass(frozen=True)
class Claimant:
    """Who claims: ``name`` is the identity recorded on claims and in the journal
    (diagnostics only); ``token``, unique to each worker run, is what ownership compares.
    Two claimants with the same name never settle, renew or release each other's jobs."""

    name: str
    token: uuid.UUID = field(default_factory=uuid.uuid4)


class ClaimAnswer(NamedTuple):
    """What ``job_claim`` did: the rows it claimed, the ids whose completion applied (the
    others lost their claim), and the expired claims it recovered first (rows with
    id, kind, attempt, failures, max_failures and ``recovered_from``, the dead claimer)."""

    claimed: list[Record]
    settled: set[int]
    recovered: list[Record]


async def job_claim(
    conn: Conn,
    *,
    schema: str,
    claimant: Claimant,
    kinds: Sequence[str],
    leases: Sequence[float],
    floor: int,
    limit: int,
    backoff: Backoff,
    done: Sequence[tuple[int, int, str | None]] = (),
    replan: bool = False,
) -> ClaimAnswer:
    """Settle ``done`` (id, attempt, result) as completed, recover expired claims (a CTE,
    ``_recover_cte``; ``backoff`` for tasks that declared none) and claim up to ``limit``
    jobs of ``kinds`` at priority ``floor`` or above, in one statement and one commit.

    On the worker loop's held connection the statement keeps its generic plan, and
    ``replan`` (the last claim came back full) lets it be planned anew against the
    table as it is now (``Held.fetch_planned``)."""
    if isinstance(conn, Held):
        run: Any = functools.partial(conn.fetch_planned, replan=replan)
    else:
        run = conn.fetch
    rows = await run(
        sql.statement("job_claim", schema),
        claimant.name,
        kinds,
        leases,
        floor,
        limit,
        backoff.base,
        backoff.factor,
        backoff.cap,
        [d[0] for d in done],
        [d[1] for d in done],
        [d[2] for d in done],
        claimant.token,
        backoff.jitter,
    )
    claimed = [r for r in rows if not r["settled"]]
    settled = {int(r["id"]) for r in rows if r["settled"] and r["recovered_from"] is None}
    recovered = [r for r in rows if r["recovered_from"] is not None]
    return ClaimAnswer(claimed, settled, recovered)


async def job_next_visible_at(conn: Conn, *, schema: str, kinds: Sequence[str]) -> datetime | None:
    """When the next pending job of ``kinds`` becomes visible (due ones included)."""
    value: datetime | None = await conn.fetchval(
        sql.statement("job_next_visible_at", schema), kinds
    )
    return value


async def job_recover_stale(
    conn: Conn, *, schema: str, recoverer: str, backoff: Backoff
) -> list[Record]:
    """Recover expired claims; ``backoff`` applies to jobs whose task declared none."""
    return list(
        await conn.fetch(
            sql.statement("job_recover_stale", schema),
            recoverer,
            backoff.base,
            backoff.factor,
            backoff.cap,
            backoff.jitter,
        )
    )
