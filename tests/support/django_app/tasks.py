"""Django tasks (the Tasks framework) that the tests enqueue through VenturiBackend."""

from __future__ import annotations

from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:
    from django_tasks import TaskContext, task


# What ``noted`` ran, in order, in this process (the scenario that drains the queue).
RAN: list[str] = []


class Refused(Exception):
    """What ``fails`` raises."""


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
def fails(why: str) -> None:
    raise Refused(why)


@task()
def noted(tag: str) -> str:
    RAN.append(tag)
    return tag


@task()
def exits(code: int) -> None:
    raise SystemExit(code)


@task(takes_context=True)
def with_context(context: TaskContext, tag: str) -> dict[str, Any]:
    return {"tag": tag, "attempt": context.attempt, "id": context.task_result.id}


@task(queue_name="reports", priority=50)
async def report(n: int) -> list[int]:
    return list(range(n))


@task(priority=-10)
def low() -> str:
    return "low"
