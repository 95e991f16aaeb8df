"""The in-flight set's handler tasks (no database): on Python 3.12 and later a handler
takes its first step as its task is made (an eager task), and only the worker's own
tasks are made so: the tasks a handler creates are the loop's ordinary ones, and a task
factory the application set on the loop still makes the handlers' tasks."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

import venturi
from tests.support.carries import Item
from tests.support.fakes import job_row
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.inflight import EAGER, InFlight, starts_eagerly
from venturi.runtime.instruments import Instruments

DSN = "postgresql://nowhere.invalid/none"


def _inflight(*tasks: venturi.Task[Any]) -> InFlight:
    config = WorkerConfig.build(DSN)
    regs = [Registration.check(t, None, None, None, None) for t in tasks]
    return InFlight(None, policies(regs, config), lambda: None, Instruments(False))


async def _all_ended(inflight: InFlight) -> None:
    await asyncio.wait(list(inflight.handles))
    assert all(h.exception() is None for h in inflight.handles)


def test_handlers_start_eagerly_from_python_3_12() -> None:
    assert EAGER == (sys.version_info >= (3, 12))


async def test_a_handler_that_does_not_wait_has_ended_once_its_claim_is_started(
    kinds: list[str],
) -> None:
    steps: list[int] = []

    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        steps.append(ctx.job.id)

    inflight = _inflight(venturi.task(kind="if_nowait")(handler))
    inflight.start([job_row(1, "if_nowait"), job_row(2, "if_nowait")])
    # Eager: each ran to its end as its task was made, in the claim's order; otherwise
    # none has begun before the loop's next pass.
    assert steps == ([1, 2] if EAGER else [])
    assert all(h.done() for h in inflight.handles) == EAGER
    await _all_ended(inflight)
    assert steps == [1, 2] and inflight.per_kind["if_nowait"] == 2


async def test_a_task_the_handler_creates_is_not_eager(kinds: list[str]) -> None:
    steps: list[str] = []

    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        async def child() -> None:
            steps.append("child")

        task = asyncio.create_task(child())
        steps.append("handler")
        await task

    inflight = _inflight(venturi.task(kind="if_child")(handler))
    inflight.start([job_row(1, "if_child")])
    await _all_ended(inflight)
    # An eager child would have run inside create_task, before the handler went on.
    assert steps == ["handler", "child"]


async def test_a_task_factory_set_on_the_loop_makes_the_handlers_tasks(
    kinds: list[str],
) -> None:
    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        return None

    made: list[asyncio.Task[Any]] = []

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        made.append(task)
        return task

    loop = asyncio.get_running_loop()
    inflight = _inflight(venturi.task(kind="if_factory")(handler))
    assert starts_eagerly(loop) == EAGER
    loop.set_task_factory(factory)  # type: ignore[arg-type]
    try:
        # Not eager under the application's factory: the claim then yields once after
        # starting its handlers, so that they take their first step before its next
        # statement, as on Python 3.11.
        assert not starts_eagerly(loop)
        inflight.start([job_row(1, "if_factory"), job_row(2, "if_factory")])
    finally:
        loop.set_task_factory(None)
    assert list(inflight.handles) == made and len(made) == 2
    await _all_ended(inflight)
