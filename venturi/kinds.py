"""The registry of declared tasks, kind -> task, and ``Declared``: what a task is to the
modules below ``venturi.tasks``. ``venturi.tasks.Task`` derives from it and registers
itself here.

Why apart from ``venturi.tasks``: a ``Task`` names ``Context`` in its handler's type,
and ``Context`` calls the workflow primitives, which spawn tasks and decode their
results. Were the primitives to import ``venturi.tasks``, it and ``venturi.context``
would import each other; they import this instead.
"""

from __future__ import annotations

from typing import Any

from venturi.db.enqueue import JobSpec
from venturi.priority import Priority


class Declared:
    """A task declared with ``@venturi.task``: its ``kind``, the type its result decodes
    as (``result_type``), and its jobs (``job``). Only ``venturi.tasks.Task`` derives
    from it, so ``isinstance(x, Declared)`` asks whether ``x`` is a venturi task."""

    __slots__ = ()
    kind: str
    result_type: Any

    def job(
        self,
        carry: Any,
        *,
        priority: Priority | None = None,
        key: str | None = None,
        group: str | None = None,
    ) -> JobSpec:
        raise NotImplementedError


_REGISTRY: dict[str, Declared] = {}


def registered() -> dict[str, Declared]:
    """A copy of the registry: kind -> task."""
    return dict(_REGISTRY)


def declared(kind: str) -> Declared | None:
    """The task registered under ``kind``, if any."""
    return _REGISTRY.get(kind)


def register(task: Declared) -> None:
    """Register ``task`` under its kind (replacing one registered before)."""
    _REGISTRY[task.kind] = task


def unregister(kind: str) -> None:
    """Forget a kind (tests that declare throwaway tasks use this)."""
    _REGISTRY.pop(kind, None)
