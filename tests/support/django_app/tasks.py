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


# --- workflows in Django tasks (docs/django.md's worked example) ------------------------

CHARGED: list[int] = []


def charge_card(order_id: int, idempotency_key: str) -> str:
    CHARGED.append(order_id)
    return f"charge-{order_id}"


@task()
def approve_order(order_id: int, cool_off_seconds: float = 600) -> str:
    from datetime import timedelta

    from venturi.contrib.django import job_context

    ctx = job_context()  # the venturi Context of this run
    charge = ctx.step("charge", charge_card, order_id, ctx.step_key("charge"))
    ctx.sleep("cool-off", timedelta(seconds=cool_off_seconds))
    approval = ctx.wait_for_signal("approval", dict, timeout=timedelta(days=2))
    return f"{charge} approved by {approval['by']}"


@task()
async def approve_async(order_id: int) -> str:
    from venturi.contrib.django import job_context

    ctx = job_context()
    charge = await ctx.step("charge", charge_card, order_id, ctx.step_key("charge"))
    approval = await ctx.wait_for_signal("approval", dict)
    return f"{charge} approved by {approval['by']}"


@task()
def follow_up(tag: str) -> str:
    """Enqueues ``noted`` twice: once in the group it runs in, once in none."""
    from venturi.contrib.django import group

    inherited = noted.enqueue(f"{tag}-inherited").id
    with group(None):
        alone = noted.enqueue(f"{tag}-alone").id
    return f"{inherited} {alone}"


@task()
def ratio(a: float, b: float) -> float:
    """Its return value is infinite when ``b`` is 0.0 (IEEE division: no error)."""
    return a * float("inf") if b == 0.0 else a / b
