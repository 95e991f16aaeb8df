"""docs/metrics.md's example scrape is what its own setup gives: a worker (concurrency 4)
runs 50 send_email jobs, every tenth raising, max_failures=1, and the settled counters it
shows are the ones the worker counts."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
from prometheus_client import REGISTRY

import venturi
from tests.support import ROOT, running, wait_status
from venturi import Context
from venturi.runtime.worker import Worker

_SETTLED = re.compile(
    r'^venturi_jobs_settled_total\{kind="send_email",outcome="([a-z-]+)"\} ([0-9.]+)$', re.M
)


def _settled(outcome: str) -> float:
    found = REGISTRY.get_sample_value(
        "venturi_jobs_settled_total", {"kind": "send_email", "outcome": outcome}
    )
    return found or 0.0


async def test_the_example_scrape_is_what_its_setup_gives(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    shown = {o: float(n) for o, n in _SETTLED.findall((ROOT / "docs/metrics.md").read_text())}
    # It showed outcome="failed" 5: each of those failures ended its job, counted dead.
    assert shown == {"dead": 5.0, "completed": 45.0}

    @venturi.task(kind="send_email", max_failures=1)
    async def send_email(ctx: Context[Any], n: int) -> None:
        if n % 10 == 0:
            raise ValueError("smtp down")

    before = {o: _settled(o) for o in ("dead", "completed", "failed")}
    ids = await venturi.enqueue_many(conn, [send_email.job(i) for i in range(50)])
    async with running(Worker(None, dsn, [send_email], metrics=True, concurrency=4)):
        for i, job_id in enumerate(ids):
            await wait_status(conn, job_id, "dead" if i % 10 == 0 else "completed")
    counted = {o: _settled(o) - before[o] for o in before}
    assert counted == {**shown, "failed": 0.0}
