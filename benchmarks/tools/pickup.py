"""Where pickup latency goes (issue 16, target 2).

    python -m benchmarks.tools.pickup [--samples 300] [--json out.json]

One database of its own, one process, uvloop. Three measurements, alternating sample by
sample so the machine's state is shared:

1. **bare notification**: a connection LISTENs on venturi's channel; another enqueues one
   job (``task.enqueue``: ``job_insert``, its trigger's NOTIFY, one commit). From the
   enqueue call's return to the listener's callback.
2. **bare claim**: ``job_claim`` of one row on a connection of its own (its prepared
   statement), from the call to its answer: one round trip with a commit (a WAL flush),
   with ``synchronous_commit`` on and, on a second connection, off (what an opt-in
   that relaxes the durability of the worker's own writes would save).
3. **the worker** (``Worker(concurrency=10)`` in this process): enqueue returned ->
   the worker's notification callback -> the claim statement sent -> its answer -> the
   handler started. The parts are taken by wrapping ``Loop.on_notify``,
   ``venturi.db.claims.job_claim`` and ``job_claim_one`` (an idle worker's claim) on
   this worker; each sample's job is told apart by id.

Between samples the harness sleeps 20-60 ms, as ``benchmarks.compare`` does. Printed:
p50 and p99 of each part, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from benchmarks.common import (
    add_dsn_option,
    create_database,
    drop_database,
    git_head,
    percentile,
)
from benchmarks.probe import install as install_probe
from benchmarks.systems.venturi import Noop, venturi_noop
from venturi import db, sql
from venturi.runtime.loop import Loop
from venturi.runtime.worker import Worker

SCHEMA = sql.DEFAULT_SCHEMA


# The bare measurements' jobs: a kind the worker does not run, so its notifications and
# claims leave them alone (its callback ignores a payload of other kinds).
@venturi.task(kind="bench_pickup_bare")
async def bare(ctx: venturi.Context[Any], carry: Noop) -> None:
    pass


def log(msg: str) -> None:
    sys.stderr.write(f"[pickup {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


async def bare_notification(enq: Any, listener: Any) -> float:
    got: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    def heard(*_: Any) -> None:
        if not got.done():
            got.set_result(time.monotonic())

    await listener.add_listener(sql.channel(SCHEMA), heard)
    try:
        await bare.enqueue(enq, Noop(0))
        t0 = time.monotonic()
        t1 = await asyncio.wait_for(got, 5)
    finally:
        await listener.remove_listener(sql.channel(SCHEMA), heard)
    return t1 - t0


async def bare_claim(enq: Any, claimer: Any) -> float:
    await bare.enqueue(enq, Noop(0))
    t0 = time.monotonic()
    answer = await db.claims.job_claim(
        claimer,
        schema=SCHEMA,
        claimant=db.Claimant("pickup:bare"),
        kinds=[bare.kind],
        leases=[60.0],
        floor=0,
        limit=1,
    )
    t1 = time.monotonic()
    assert len(answer.claimed) == 1
    return t1 - t0


PARTS = (
    "bare notification",
    "bare claim, synchronous_commit on",
    "bare claim, synchronous_commit off",
    "worker: enqueue returned -> notification callback",
    "worker: notification callback -> claim sent",
    "worker: claim round trip",
    "worker: claim answered -> handler started",
    "worker: total",
)


async def worker_sample(
    enq: Any,
    i: int,
    marks: dict[str, float],
    ready: asyncio.Event,
    started: dict[int, float],
    parts: dict[str, list[float]],
) -> None:
    """One job through the worker, its parts taken from the marks its wrappers left."""
    marks.clear()
    ready.clear()
    await venturi_noop.enqueue(enq, Noop(i))
    t0 = time.monotonic()
    await asyncio.wait_for(ready.wait(), 5)
    t4 = started[i]
    n, s, a = marks.get("notify"), marks.get("claim sent"), marks.get("claim answered")
    parts["worker: total"].append(t4 - t0)
    if n is not None and s is not None and a is not None:
        parts["worker: enqueue returned -> notification callback"].append(n - t0)
        parts["worker: notification callback -> claim sent"].append(s - n)
        parts["worker: claim round trip"].append(a - s)
        parts["worker: claim answered -> handler started"].append(t4 - a)


def _time_claims(marks: dict[str, float]) -> Any:
    """Wrap the worker's claims so that each one that claimed a job marks when it was sent
    and answered: ``job_claim``, and ``job_claim_one`` (an idle worker's claim, the
    pickup's since 5cd61f4). Returns what puts the real ones back."""
    real_claim, real_one = db.claims.job_claim, db.claims.job_claim_one

    async def claim(*a: Any, **kw: Any) -> Any:
        t0 = time.monotonic()
        answer = await real_claim(*a, **kw)
        if answer.claimed:
            marks["claim sent"], marks["claim answered"] = t0, time.monotonic()
        return answer

    async def claim_one(*a: Any, **kw: Any) -> Any:
        t0 = time.monotonic()
        rows, more = await real_one(*a, **kw)
        if rows:
            marks["claim sent"], marks["claim answered"] = t0, time.monotonic()
        return rows, more

    def restore() -> None:
        db.claims.job_claim = real_claim
        db.claims.job_claim_one = real_one

    db.claims.job_claim = claim
    db.claims.job_claim_one = claim_one
    return restore


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    name = f"bench_venturi_pickup_{os.getpid()}"
    dsn = await create_database(args.dsn, name)
    enq = await asyncpg.connect(dsn)
    listener = await asyncpg.connect(dsn)
    sync_claimer = await asyncpg.connect(dsn)
    async_claimer = await asyncpg.connect(dsn)
    await db.schema.apply_schema(enq, schema=SCHEMA)
    await async_claimer.execute(
        sql.statement("maintenance/session_setting", SCHEMA), "synchronous_commit", "off"
    )
    parts: dict[str, list[float]] = {k: [] for k in PARTS}
    worker: Worker[None] = Worker(None, dsn, [venturi_noop], concurrency=10)
    marks: dict[str, float] = {}
    started: dict[int, float] = {}
    ready = asyncio.Event()

    on_notify = Loop.on_notify

    def notified(loop: Loop, payload: str) -> None:
        marks.setdefault("notify", time.monotonic())
        on_notify(loop, payload)

    # Patching a method on the class: mypy reads the attribute as the unbound method
    # and so expects ``self`` twice (assignment), besides refusing the patch (method-assign).
    Loop.on_notify = notified  # type: ignore[method-assign,assignment]

    def probe(i: int) -> None:
        started[i] = time.monotonic()
        ready.set()

    install_probe(probe)
    restore = _time_claims(marks)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    rng = random.Random(7)
    try:
        # The worker's first job (its start-up) is left out, as compare does.
        await venturi_noop.enqueue(enq, Noop(-1))
        await asyncio.wait_for(ready.wait(), 30)
        for i in range(args.samples):
            await asyncio.sleep(rng.uniform(0.02, 0.06))
            parts["bare notification"].append(await bare_notification(enq, listener))
            await asyncio.sleep(rng.uniform(0.02, 0.06))
            parts["bare claim, synchronous_commit on"].append(await bare_claim(enq, sync_claimer))
            await asyncio.sleep(rng.uniform(0.02, 0.06))
            parts["bare claim, synchronous_commit off"].append(await bare_claim(enq, async_claimer))
            await asyncio.sleep(rng.uniform(0.02, 0.06))
            await worker_sample(enq, i, marks, ready, started, parts)
    finally:
        stop.set()
        await running
        restore()
        for c in (enq, listener, sync_claimer, async_claimer):
            await c.close()
        await drop_database(args.dsn, name)
    return {
        "commit": os.environ.get("VENTURI_BENCH_REV") or git_head(),
        "samples": args.samples,
        "load": os.getloadavg()[0],
        "parts": {
            k: {
                "n": len(v),
                "p50_ms": 1000 * statistics.median(v),
                "p99_ms": 1000 * percentile(v, 99),
            }
            for k, v in parts.items()
            if v
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tools.pickup", description=__doc__)
    add_dsn_option(p)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        uvloop.install()
    out = asyncio.run(amain(args))
    print(f"pickup breakdown on {out['commit']}, {out['samples']} samples, load {out['load']:.2f}")
    width = max(len(k) for k in out["parts"])
    for k, v in out["parts"].items():
        print(f"  {k:<{width}}  p50 {v['p50_ms']:6.3f} ms  p99 {v['p99_ms']:6.3f} ms  (n={v['n']})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
