"""Seeding jobs in known states for the operator tests, through the runtime's own
statements (the same ones a worker runs), so no test writes SQL of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from venturi import JobSpec, db

S = "venturi"

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app.py", line 3, in fetch\n'
    "    raise ConnectionError('upstream refused')\n"
    "ConnectionError: upstream refused\n"
)


async def make(
    conn: Any,
    kind: str,
    state: str,
    *,
    carry: str = '{"n": 1}',
    key: str | None = None,
    worker: str = "w1:1",
    lease: float = 3600.0,
    priority: int = 1,
    error: str = TRACEBACK,
) -> int:
    """One job of ``kind`` brought to ``state``: pending, scheduled, claimed, completed,
    failed (pending again after a failure, visible in an hour), or dead (after a failure
    with a traceback, ``error``). Make claimed and finished jobs before a kind's pending ones: the
    claim takes the oldest due job of the kind."""
    after = 3600.0 if state == "scheduled" else None
    [job_id] = await db.enqueue.job_insert_many(
        conn, schema=S, specs=[JobSpec(kind, carry, priority, None, after, key, 25)]
    )
    if state in ("pending", "scheduled"):
        return job_id
    me = db.Claimant(worker)
    rows = (
        await db.claims.job_claim(
            conn,
            schema=S,
            claimant=me,
            kinds=[kind],
            leases=[lease],
            floor=0,
            limit=1,
        )
    ).claimed
    assert [r["id"] for r in rows] == [job_id], "claimed another job: seed order is wrong"
    attempt = rows[0]["attempt"]
    if state == "claimed":
        return job_id
    if state == "completed":
        assert await db.settle.job_complete_many_if_owned(
            conn, schema=S, claimant=me, ids=[job_id], attempts=[attempt], results=['{"ok":true}']
        )
    elif state == "failed":
        status = await db.settle.job_fail_if_owned(
            conn,
            schema=S,
            claimant=me,
            job_id=job_id,
            attempt=attempt,
            event="failed",
            error=error,
            carry=None,
            delay=3600.0,
            force_dead=False,
        )
        assert status == "pending"
    elif state == "dead":
        status = await db.settle.job_fail_if_owned(
            conn,
            schema=S,
            claimant=me,
            job_id=job_id,
            attempt=attempt,
            event="failed",
            error=error,
            carry=None,
            delay=0.0,
            force_dead=True,
        )
        assert status == "dead"
    else:
        raise ValueError(state)
    return job_id


@dataclass
class Seeded:
    ids: dict[str, list[int]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> list[int]:
        return self.ids[name]


async def seed(conn: Any) -> Seeded:
    """Two kinds in every state:

    mail:  2 completed, 1 claimed by w1:1, 3 pending due, 1 scheduled
    fetch: 1 completed, 1 dead (traceback), 1 failed (pending in an hour), 1 claimed by
           w2:2, 1 pending due
    """
    s = Seeded()
    s.ids["mail_completed"] = [await make(conn, "mail", "completed") for _ in range(2)]
    s.ids["mail_claimed"] = [await make(conn, "mail", "claimed", worker="w1:1")]
    s.ids["mail_due"] = [await make(conn, "mail", "pending") for _ in range(3)]
    s.ids["mail_scheduled"] = [await make(conn, "mail", "scheduled")]
    s.ids["fetch_completed"] = [await make(conn, "fetch", "completed")]
    s.ids["fetch_dead"] = [await make(conn, "fetch", "dead", carry='{"url": "https://x.test"}')]
    s.ids["fetch_failed"] = [await make(conn, "fetch", "failed")]
    s.ids["fetch_claimed"] = [await make(conn, "fetch", "claimed", worker="w2:2")]
    s.ids["fetch_due"] = [await make(conn, "fetch", "pending")]
    return s
