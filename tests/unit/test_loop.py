"""The loop's decisions and its shutdown steps (no database: a fake connection answers):
how long an iteration says to wait, and how a drain settles the handlers that stop when
asked and releases those that do not."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import venturi
from tests.support.carries import Item
from tests.support.fakes import FakeConn, job_row
from tests.support.waits import until_cancelled
from venturi import sql
from venturi.db.claims import Claimant
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.instruments import Instruments
from venturi.runtime.loop import Loop
from venturi.runtime.recovery import RECOVER_BATCH, RECOVER_EVERY

DSN = "postgresql://nowhere.invalid/none"


def _loop(*tasks: venturi.Task[Any], **knobs: Any) -> Loop:
    config = WorkerConfig.build(DSN, **knobs)
    regs = [Registration.check(t, None, None, None, None) for t in tasks]
    return Loop(config, Claimant("w"), None, policies(regs, config), Instruments(False))


def _settling(**answers: Any) -> FakeConn:
    """Every claim still held: each settlement answers with its row."""
    owned = {
        name: (lambda args: [{"id": args[1]}])
        for name in ("job_release_if_owned", "job_cancel_if_owned", "job_dead_if_owned")
    }
    done = {"job_complete_many_if_owned": lambda args: [{"id": i} for i in args[1]]}
    return FakeConn(**(owned | done | answers))


def _noop(kind: str) -> venturi.Task[Item]:
    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        return None

    return venturi.task(kind=kind)(handler)


async def test_an_empty_queue_waits_for_the_next_visible_job(kinds: list[str]) -> None:
    loop = _loop(_noop("lp_idle"), poll_max=30)
    soon = datetime.now(UTC) + timedelta(seconds=5)
    conn = FakeConn(
        job_next_visible_at=lambda args: [{"next_visible_at": soon, "next_wake_at": None}]
    )
    timeout = await loop.iterate(conn, asyncio.Event())  # type: ignore[arg-type]
    assert [name for name, _ in conn.calls] == ["job_claim_one", "job_next_visible_at"]
    assert 0 < timeout <= 5
    # Nothing scheduled: the next poll is poll_max away.
    conn = FakeConn()
    assert 5 < await loop.iterate(conn, asyncio.Event()) <= 30  # type: ignore[arg-type]


async def test_a_queue_with_more_goes_again_at_once(kinds: list[str]) -> None:
    gate = asyncio.Event()

    async def held(ctx: venturi.Context[Any], carry: Item) -> None:
        await gate.wait()

    loop = _loop(venturi.task(kind="lp_more")(held), concurrency=2)
    ids = iter(range(1, 100))
    conn = _settling(
        job_claim=lambda args: [job_row(next(ids), "lp_more") for _ in range(args[4])],
        job_claim_one=lambda args: [job_row(next(ids), "lp_more", more=True)],
    )
    assert await loop.iterate(conn, asyncio.Event()) == 0.0  # type: ignore[arg-type]
    assert len(loop.inflight) == 2 and loop.inflight.per_kind["lp_more"] == 2
    # Every slot busy: no claim; only a handler finishing helps.
    conn.calls.clear()
    await loop.iterate(conn, asyncio.Event())  # type: ignore[arg-type]
    assert not [name for name, _ in conn.calls if name.startswith("job_claim")]
    gate.set()
    while loop.inflight.handles and not all(h.done() for h in loop.inflight.handles):
        await loop.wake.wait()
        loop.wake.clear()
    # Their completions ride the next claim.
    conn.calls.clear()
    await loop.iterate(conn, asyncio.Event())  # type: ignore[arg-type]
    [claim] = conn.named("job_claim")
    assert sorted(claim[5]) == [1, 2] and loop.completer.unsettled == []


async def test_a_drain_settles_who_stops_and_releases_who_does_not(kinds: list[str]) -> None:
    running: list[int] = []
    everyone = asyncio.Event()

    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        running.append(carry.n)
        if len(running) == 2:
            everyone.set()
        if carry.n == 1:
            await ctx.cancelled()  # cooperative: stops when asked
            return
        await until_cancelled()  # ignores the request

    loop = _loop(venturi.task(kind="lp_drain")(handler), shutdown_timeout=0.2)
    loop.inflight.start(
        [job_row(1, "lp_drain", carry='{"n": 1}'), job_row(2, "lp_drain", carry='{"n": 2}')]
    )
    await everyone.wait()
    conn = _settling()
    await loop.drain(conn)  # type: ignore[arg-type]
    assert conn.named("job_complete_many_if_owned")[0][1] == [1]
    [release] = conn.named("job_release_if_owned")
    assert release[1] == 2 and "shutdown_timeout" in release[3]
    assert not loop.inflight.handles and loop.completer.unsettled == []
    assert +loop.inflight.per_kind == Counter()


async def test_abandoning_cancels_every_handler_and_releases_its_job(
    kinds: list[str],
) -> None:
    started = asyncio.Event()

    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        started.set()
        await until_cancelled()

    loop = _loop(venturi.task(kind="lp_abandon")(handler))
    loop.inflight.start([job_row(5, "lp_abandon")])
    await started.wait()
    conn = _settling()
    await loop.abandon(conn)  # type: ignore[arg-type]
    [release] = conn.named("job_release_if_owned")
    assert release[1] == 5 and "stopped at once" in release[3]
    assert not loop.inflight.handles and +loop.inflight.per_kind == Counter()


def test_a_database_error_backs_off_and_looks_for_orphans(kinds: list[str]) -> None:
    loop = _loop(_noop("lp_error"))
    first = loop.failed(ConnectionResetError("gone"), 1)
    later = loop.failed(ConnectionResetError("gone"), 5)
    assert 0 < first < later
    assert loop.orphans_possible and not loop.isolate  # nothing queued to isolate
    assert loop.instruments.stats["db_errors"] == 2


def test_recovery_runs_at_least_every_second_and_every_poll_max(kinds: list[str]) -> None:
    # The bound on how long an expired claim waits while a worker runs (recovery.py).
    assert _loop(_noop("lp_rec"), poll_max=30).recovery.every == RECOVER_EVERY == 1.0
    assert _loop(_noop("lp_rec_fast"), poll_max=0.2).recovery.every == 0.2


def test_a_recovery_batch_is_the_statements_limit() -> None:
    # Recovery.recover runs again at once after a full batch: the batch must be the LIMIT.
    assert f"LIMIT {RECOVER_BATCH}\n" in sql.statement("job_recover_stale")
