"""venturi's workflows (SPEC section 12) for ``benchmarks.scenarios.workflows``.

- ``three``: one job whose handler records three steps (``await ctx.step(...)``) and
  completes;
- ``fanout``: a parent that spawns ten children (``ctx.spawn``) and gathers their results
  (``ctx.gather``): its first run spawns and waits (the job gives up its slot), the last
  child to finish wakes it, and its second run finds the ten recorded and completes.

Written against SPEC 12's API names. Until the workflow code is on the branch measured
(``venturi.Context`` without ``step``), ``available()`` is False and every scenario here
reports "venturi workflows not available" instead of running; the tasks are declared only
when available, since ``@venturi.task(result=...)`` is part of the same change.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import asyncpg
import msgspec

import venturi
from benchmarks import probe
from benchmarks.sql import statement as bsql
from venturi import db, sql

KINDS = {"one": "bench_wf_one", "three": "bench_wf_three", "fanout": "bench_wf_fanout"}
CHILDREN = 10
NOT_AVAILABLE = "venturi workflows not available (venturi.Context has no step)"


def available() -> bool:
    """Whether the venturi being measured has SPEC 12's workflow primitives."""
    return hasattr(venturi.Context, "step")


class Wf(msgspec.Struct):
    i: int


async def step_a(i: int) -> int:
    return i + 1


async def step_b(i: int) -> int:
    return i * 2


async def step_c(i: int) -> int:
    return i - 1


@functools.cache
def tasks() -> dict[str, Any]:
    """The scenarios' tasks by name ("one", "three", "fanout", "child"), declared on first
    use."""
    if not available():
        raise RuntimeError(NOT_AVAILABLE)

    @venturi.task(kind="bench_wf_child", result=int)
    async def child(ctx: venturi.Context[Any], carry: Wf) -> venturi.Outcome:
        return venturi.complete(carry.i)

    @venturi.task(kind=KINDS["one"])
    async def one(ctx: venturi.Context[Any], carry: Wf) -> None:
        # For the statement count only: three steps minus one is two steps' cost alone.
        probe.begin()
        await ctx.step("a", step_a, carry.i)
        probe.report(carry.i)

    @venturi.task(kind=KINDS["three"])
    async def three(ctx: venturi.Context[Any], carry: Wf) -> None:
        probe.begin()
        a = await ctx.step("a", step_a, carry.i)
        b = await ctx.step("b", step_b, a)
        await ctx.step("c", step_c, b)
        probe.report(carry.i)

    @venturi.task(kind=KINDS["fanout"])
    async def fanout(ctx: venturi.Context[Any], carry: Wf) -> None:
        probe.begin()
        children = [
            await ctx.spawn(f"c{k}", child, Wf(carry.i * CHILDREN + k)) for k in range(CHILDREN)
        ]
        results = await ctx.gather(*children)
        assert len(results) == CHILDREN
        probe.report(carry.i)

    return {"one": one, "three": three, "fanout": fanout, "child": child}


class Client:
    """The harness's side: venturi's schema, the parents enqueued in one call."""

    name = "venturi"
    schema = sql.DEFAULT_SCHEMA

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)

    async def close(self) -> None:
        await self.conn.close()

    async def install(self) -> None:
        await db.schema.apply_schema(self.conn, schema=self.schema)

    async def reset(self) -> None:
        # CASCADE: the workflow tables (steps, signals) refer to jobs.
        await self.conn.execute(bsql("jobs_empty", self.schema))

    async def analyze(self) -> None:
        await self.conn.execute(sql.statement("maintenance/analyze", self.schema))

    async def enqueue_workflows(self, scenario: str, n: int) -> None:
        task = tasks()[scenario]
        await venturi.enqueue_many(self.conn, [task.job(Wf(i)) for i in range(n)])


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    found = tasks()
    handlers = [found["child"], found[cfg["scenario"]]]
    worker = venturi.Worker(None, dsn, handlers, concurrency=cfg["concurrency"])
    await worker.run(stop)
