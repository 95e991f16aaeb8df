"""Claiming by hand: tests that drive the claim statement themselves (ownership, recovery,
the SQL's own behaviour) without a worker, or a worker's claimer without its loop; and a
pool that loses a claim's answer after it committed, for the worker's tests of that
loss."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg

from venturi import db, sql
from venturi.runtime.claimer import Claimer
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.instruments import Instruments

SCHEMA = "venturi"


def claimer(dsn: str, *tasks: Any, occupied: Counter[str] | None = None, **knobs: Any) -> Claimer:
    """The claimer a worker of ``tasks`` (tasks, or their ``Registration``) and ``knobs``
    would have, without the worker: ``occupied`` counts its running jobs by kind."""
    config = WorkerConfig.build(dsn, **knobs)
    regs = [
        t if isinstance(t, Registration) else Registration.check(t, None, None, None, None)
        for t in tasks
    ]
    running = Counter[str]() if occupied is None else occupied
    return Claimer(config, db.Claimant("w"), policies(regs, config), running, Instruments(False))


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


def is_claim(query: str) -> bool:
    """Whether ``query`` is a worker's claim of jobs without a group: ``job_claim``, or
    the idle worker's ``job_claim_one``."""
    return query in (sql.statement("job_claim"), sql.statement("job_claim_one"))


def claimed_in(rows: Sequence[Any]) -> list[Any]:
    """The claimed jobs among a claim's rows (``job_claim`` also returns the completions
    that lost their claim, ``lost = true``; ``job_claim_one``'s rows are all claims)."""
    return [r for r in rows if not r.get("lost")]


class LoseClaimAnswer:
    """A real pool whose next claim commits but whose answer is lost, as when the
    connection dies between the commit and the reply."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetch(self, query: str, *args: Any, **kw: Any) -> Any:
        rows = await self._pool.fetch(query, *args, **kw)
        if self.armed and is_claim(query) and claimed_in(rows):
            self.armed = False
            raise ConnectionResetError("connection lost after the claim committed")
        return rows
