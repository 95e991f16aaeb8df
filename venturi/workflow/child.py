"""``Child``: what ``ctx.spawn`` returns and ``ctx.gather`` takes."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

R = TypeVar("R")


class Child(Generic[R]):
    """A child job spawned by ``ctx.spawn``: its ``job_id`` and ``task`` (whose
    ``result`` type its result decodes as, in ``ctx.gather``)."""

    __slots__ = ("job_id", "task")

    def __init__(self, job_id: int, task: Any) -> None:
        self.job_id = job_id
        self.task = task

    def __repr__(self) -> str:
        return f"<venturi.Child job {self.job_id} ({self.task.kind})>"
