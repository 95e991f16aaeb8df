"""How a handler's ending becomes a settlement (no database): its return value, its
exception (retried, or dead on a ``retry_on`` miss), its timeout, a carry that no longer
decodes, and a cancellation by the worker or by something else."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import venturi
from tests.support.carries import Item
from tests.support.fakes import run_of
from tests.support.waits import until_cancelled
from venturi.runtime import executor
from venturi.runtime import settlement as s


def _task(kind: str, fn: Any, **knobs: Any) -> venturi.Task[Item]:
    async def handler(ctx: venturi.Context[Any], carry: Item) -> Any:
        return await fn(ctx, carry)

    return venturi.task(kind=kind, **knobs)(handler)


async def _ending(task: venturi.Task[Item], **fields: Any) -> s.Settlement:
    run = run_of(task, **fields)
    await executor.run_handler(run, None)
    assert run.outcome is not None
    return run.outcome


@pytest.mark.parametrize(
    ("returned", "settlement"),
    [
        (None, s.Completed()),
        (venturi.complete(), s.Completed()),
        (venturi.complete({"a": 1}), s.Completed('{"a":1}')),
        (venturi.pause(Item(3), after=60), s.Paused('{"n":3}', None, 60.0)),
        (venturi.retry(after=5, reason="busy"), s.Retried(None, 5.0, "busy")),
        (venturi.retry(Item(4)), s.Retried('{"n":4}', None, "")),
        (venturi.dead("gone"), s.Dead("gone")),
    ],
)
def test_each_outcome_maps_to_its_settlement(
    kinds: list[str], returned: Any, settlement: s.Settlement
) -> None:
    task = _task("ex_map", lambda ctx, carry: asyncio.sleep(0))  # stays: a no-op, never run
    assert executor.settlement_of(task, returned) == settlement


def test_a_return_that_is_no_outcome_or_cannot_be_stored_is_a_failure(
    kinds: list[str],
) -> None:
    task = _task("ex_bad", lambda ctx, carry: asyncio.sleep(0))  # stays: a no-op, never run
    wrong = executor.settlement_of(task, 42)
    assert type(wrong) is s.Failed and "not an outcome" in wrong.error
    unstorable = executor.settlement_of(task, venturi.complete({"x": object()}))
    assert type(unstorable) is s.Failed and "cannot be stored" in unstorable.error


async def test_an_exception_fails_the_run_and_a_retry_on_miss_makes_it_dead(
    kinds: list[str],
) -> None:
    async def raising(ctx: Any, carry: Item) -> None:
        raise (KeyError if carry.n else OSError)("x")

    plain = await _ending(_task("ex_raise", raising))
    assert type(plain) is s.Failed and "KeyError" in plain.error and plain.dead is None
    picky = _task("ex_picky", raising, retry_on=(OSError,))
    missed = await _ending(picky)
    assert type(missed) is s.Failed and missed.dead is not None and "KeyError" in missed.dead
    caught = await _ending(picky, carry_text='{"n": 0}')
    assert type(caught) is s.Failed and caught.dead is None


async def test_a_run_past_its_timeout_is_timed_out(kinds: list[str]) -> None:
    async def forever(ctx: Any, carry: Item) -> None:
        await until_cancelled()

    ending = await _ending(_task("ex_slow", forever, timeout=0.01))
    assert type(ending) is s.TimedOut


async def test_a_carry_that_no_longer_decodes_is_undecodable(kinds: list[str]) -> None:
    called: list[int] = []

    async def handler(ctx: Any, carry: Item) -> None:
        called.append(carry.n)

    ending = await _ending(_task("ex_undecodable", handler), carry_text='{"n": "one"}')
    assert type(ending) is s.Undecodable and called == []


async def test_a_cancellation_is_a_release_only_when_the_worker_stopped_it(
    kinds: list[str],
) -> None:
    started = asyncio.Event()

    async def forever(ctx: Any, carry: Item) -> None:
        started.set()
        await until_cancelled()

    task = _task("ex_cancel", forever)
    for stopped, expected in (("worker stopping", s.Released), (None, s.Failed)):
        started.clear()
        run = run_of(task)
        handle = asyncio.create_task(executor.run_handler(run, None))
        await started.wait()
        run.stopped = stopped
        handle.cancel()
        await asyncio.wait([handle])
        assert type(executor.ending(handle, run)) is expected


@pytest.mark.parametrize("tier", list(venturi.Priority))
async def test_the_handler_sees_its_jobs_tier(tier: venturi.Priority) -> None:
    seen: list[Any] = []

    async def look(ctx: venturi.Context[Any], carry: Item) -> None:
        seen.append(ctx.job.priority)

    assert await _ending(_task(f"ex_tier_{tier.name.lower()}", look), priority=int(tier)) == (
        s.COMPLETED
    )
    assert seen == [tier] and seen[0] is tier


# --- what the context reads of its run, made when first read (issue 38) ----------------


async def test_the_context_sees_a_stop_asked_before_and_after_it_first_looks() -> None:
    """The worker makes a run's cancellation event only when a handler waits on it: a
    stop asked before that wait still ends it at once, and one asked after wakes it."""
    seen: list[tuple[str, bool]] = []
    reached, stopped = asyncio.Event(), asyncio.Event()

    async def waits(ctx: venturi.Context[Any], carry: Item) -> None:
        seen.append(("before", ctx.is_cancelled()))
        reached.set()
        await stopped.wait()
        seen.append(("asked", ctx.is_cancelled()))
        await ctx.cancelled()  # the event is made now, already set

    run = run_of(_task("x_cancel_late", waits))
    handle = asyncio.ensure_future(executor.run_handler(run, None))
    await reached.wait()
    run.ask_to_stop()
    stopped.set()
    await asyncio.wait_for(handle, 5)
    # Completed: ctx.cancelled() returned (a wait cut short by wait_for fails the run).
    assert seen == [("before", False), ("asked", True)] and run.outcome == s.Completed()

    first: list[bool] = []
    waiting = asyncio.Event()

    async def waits_first(ctx: venturi.Context[Any], carry: Item) -> None:
        waiter = asyncio.ensure_future(ctx.cancelled())  # the event is made before the stop
        await asyncio.sleep(0)  # stays: one step of the loop, the waiter starts waiting
        first.append(waiter.done())
        waiting.set()
        await waiter

    run = run_of(_task("x_cancel_early", waits_first))
    handle = asyncio.ensure_future(executor.run_handler(run, None))
    await waiting.wait()
    run.ask_to_stop()
    await asyncio.wait_for(handle, 5)
    assert first == [False] and run.outcome == s.Completed()


async def test_ctx_job_is_made_from_the_run_when_read() -> None:
    """``ctx.job`` as the worker gives it: the run's fields, the enqueue time made from
    the claim's microseconds to the microsecond, the tier as a Priority."""
    metas: list[venturi.JobMeta] = []

    async def reads(ctx: venturi.Context[Any], carry: Item) -> None:
        metas.append(ctx.job)
        assert ctx.job is metas[0]  # made once

    enqueued = datetime(2026, 12, 5, 6, 7, 8, 123457, tzinfo=UTC)
    us = (enqueued - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    run = run_of(
        _task("x_meta", reads),
        job_id=41,
        attempt=3,
        failures=2,
        priority=0,
        created_us=us,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        group="acme",
    )
    await executor.run_handler(run, None)
    assert metas == [
        venturi.JobMeta(
            41,
            "x_meta",
            venturi.Priority.HIGH,
            3,
            2,
            enqueued,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "acme",
        )
    ]
    assert metas[0].priority is venturi.Priority.HIGH
