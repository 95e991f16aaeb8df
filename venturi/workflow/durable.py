"""``Durable``: the workflow primitives of one run, as a worker-made ``Context`` hands
them out (``ctx.step`` and the others call these)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from venturi.kinds import Declared
from venturi.priority import Priority
from venturi.workflow import children, signals, steps, timers
from venturi.workflow.children import Child
from venturi.workflow.state import RunState


class Durable:
    """The primitives of one run of job ``state.job_id``; see ``venturi.Context``."""

    __slots__ = ("state",)

    def __init__(self, state: RunState) -> None:
        self.state = state

    async def step(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], transactional: bool
    ) -> Any:
        return await steps.step(self.state, name, fn, args, transactional)

    async def sleep(self, name: str, duration: timedelta | float) -> None:
        await timers.sleep_until(self.state, name, None, duration)

    async def sleep_until(self, name: str, at: datetime) -> None:
        await timers.sleep_until(self.state, name, at)

    async def wait_for_signal(
        self,
        name: str,
        type_: Any,
        timeout: timedelta | float | None,  # noqa: ASYNC109
    ) -> Any:
        return await signals.wait_for_signal(self.state, name, type_, timeout)

    async def spawn(
        self,
        name: str,
        task: Declared,
        carry: Any,
        priority: Priority | None,
        key: str | None,
        group: str | None = None,
    ) -> Child[Any]:
        return await children.spawn(self.state, name, task, carry, priority, key, group)

    async def gather(self, kids: Sequence[Child[Any]]) -> list[Any]:
        return await children.gather(self.state, kids)

    async def result_of(self, name: str) -> Any:
        return await children.result_of(self.state, name)

    async def flush(self) -> None:
        """Write the spawns the run made and has not written yet."""
        await self.state.flush()

    async def release(self) -> None:
        """The handler ended: give back the connection the primitives held."""
        await self.state.release()
