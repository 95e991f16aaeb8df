"""What a handler reads of its job (``ctx.job``), as the worker makes it from each claim
statement's row: the stored job, to the microsecond of its enqueue."""

from __future__ import annotations

from typing import Any

import asyncpg

import venturi
from tests.support import Item, running, wait_for
from venturi import Context, Priority
from venturi.runtime.worker import Worker


async def test_ctx_job_is_the_stored_job_on_every_claim_path(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: dict[int, venturi.JobMeta] = {}

    async def record(ctx: Context[Any], carry: Item) -> None:
        seen[ctx.job.id] = ctx.job

    # An idle worker's pickup (job_claim_one) then a batch (job_claim); a kind with a
    # global cap (job_claim_capped); a grouped kind (job_claim_grouped).
    plain = venturi.task(kind="meta_plain")(record)
    capped = venturi.task(kind="meta_capped", global_cap=1)(record)
    grouped = venturi.task(kind="meta_grouped", group_cap=1)(record)
    ids = [
        *await venturi.enqueue_many(
            conn, [plain.job(Item(i), priority=Priority(i % 3)) for i in range(5)]
        ),
        *await venturi.enqueue_many(conn, [capped.job(Item(i)) for i in range(3)]),
        *await venturi.enqueue_many(
            conn, [grouped.job(Item(i), group=f"tenant-{i % 2}") for i in range(4)]
        ),
    ]
    worker = Worker(None, dsn, [plain, capped, grouped], concurrency=2, poll_max=0.2)
    async with running(worker):
        await wait_for(lambda: _all_seen(seen, ids))
    for job_id in ids:
        job = await venturi.get_job(conn, job_id)
        assert job is not None
        meta = seen[job_id]
        assert (meta.id, meta.kind, meta.attempt, meta.failures, meta.group) == (
            job.id,
            job.kind,
            job.attempt,
            0,
            job.group,
        )
        assert meta.priority is Priority(job.priority)
        # Exact: the claim sends microseconds since 1970, not a rounded float.
        assert meta.created_at == job.created_at and meta.created_at.utcoffset() is not None


async def _all_seen(seen: dict[int, Any], ids: list[int]) -> bool:
    return all(i in seen for i in ids)
