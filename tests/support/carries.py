"""Carries shared by the tests' tasks, and a task that does nothing."""

from __future__ import annotations

from typing import Any

import msgspec

import venturi


class Item(msgspec.Struct):
    """A carry of one integer: what a test enqueues when the carry is not its subject
    (files that called it ``N`` import it under that name)."""

    n: int


def noop_task(kind: str, **knobs: Any) -> venturi.Task[Item]:
    """Declare a task of ``kind`` (``knobs`` as ``@venturi.task`` takes them) whose
    handler does nothing: for tests of what the worker decides about a kind."""

    @venturi.task(kind=kind, **knobs)
    async def handler(ctx: venturi.Context[Any], carry: Item) -> None:
        return None

    return handler
