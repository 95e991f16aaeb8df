"""chancy's workflow plugin (https://pypi.org/project/chancy/) for ``benchmarks.scenarios.workflows``.

chancy's workflows are graphs of jobs (``chancy.plugins.workflow.Workflow``): a step is a
job, run once every step it depends on has succeeded; the leader worker's
``WorkflowPlugin`` queues each step's job when its dependencies are done (woken by a
notification as each step's job completes, and sweeping every ``polling_interval``).
The two workflows:

- ``three``: three jobs in a chain (``Sequence``'s shape: a -> b -> c);
- ``fanout``: a ``start`` job, ten jobs depending on it, and a ``gather`` job depending
  on the ten. chancy passes no results between steps (a job's return value is not
  stored), so ``gather`` receives nothing from the ten: it only runs after them.

Fastest documented configuration, as for its plain jobs (``benchmarks.systems.chancy``):
the async executor, ``eager_polling``, the queue's shortest polling interval (1 s); and for
the workflows, ``WorkflowPlugin(polling_interval=1)`` (30 s by default) with the
``Leadership`` plugin it requires polling every second (60 s by default: the workflow
plugin does nothing until its worker leads), and no other plugin (``no_default_plugins``:
the pruner, recovery and metrics plugins only add statements here).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from benchmarks import probe
from benchmarks.systems.chancy import Client as PlainClient
from benchmarks.systems.chancy import app as chancy_app
from benchmarks.systems.chancy import queue

QUEUE = "wf"
CHILDREN = 10


async def wf_first(*, i: int) -> None:
    """The first job of each workflow: the instant it starts is the workflow's begin."""
    probe.begin()


async def wf_step(*, i: int) -> None:
    """A middle step (a chain's b, a fan-out's child)."""


async def wf_last(*, i: int) -> None:
    """The last job of each workflow: the workflow is done once it ran."""
    probe.report(i)


def _app(dsn: str, pool: int = 10) -> Any:
    from chancy.plugins.leadership import Leadership
    from chancy.plugins.workflow import WorkflowPlugin

    return chancy_app(
        dsn,
        pool,
        plugins=[Leadership(poll_interval=1, timeout=60), WorkflowPlugin(polling_interval=1)],
        no_default_plugins=True,
    )


def _job(fn: Any, i: int) -> Any:
    from chancy import Job

    return Job.from_func(fn, queue=QUEUE).with_kwargs(i=i)


def workflow(scenario: str, i: int) -> Any:
    """Workflow ``i`` of a scenario, as chancy's plugin takes it."""
    from chancy.plugins.workflow import Workflow

    wf = Workflow(f"bench_{scenario}")
    if scenario == "three":
        wf.add("a", _job(wf_first, i))
        wf.add("b", _job(wf_step, i), ["a"])
        wf.add("c", _job(wf_last, i), ["b"])
    else:
        wf.add("start", _job(wf_first, i))
        children = [f"child_{k:02}" for k in range(CHILDREN)]
        for k, name in enumerate(children):
            wf.add(name, _job(wf_step, i * CHILDREN + k), ["start"])
        wf.add("gather", _job(wf_last, i), children)
    return wf


class Client(PlainClient):
    """The harness's side: chancy's tables, a run's workflows pushed one by one."""

    def _app(self) -> Any:
        return _app(self.dsn, pool=2)

    async def reset(self) -> None:
        # The leader row too: a worker of an earlier run would otherwise lead until its
        # lease ran out, and the new worker's workflow plugin would wait for it.
        await self._execute(
            "TRUNCATE chancy_jobs, chancy_workflows, chancy_workflow_steps, chancy_leader"
        )

    async def analyze(self) -> None:
        await self._execute("ANALYZE chancy_jobs, chancy_workflows, chancy_workflow_steps")

    async def enqueue_workflows(self, scenario: str, n: int) -> None:
        from chancy.plugins.workflow import WorkflowPlugin

        for i in range(n):
            await WorkflowPlugin.push(self.app, workflow(scenario, i))


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from chancy import Worker

    logging.getLogger("bench.chancy").setLevel(logging.WARNING)
    async with _app(dsn) as app:
        # The queue's concurrency is stored in the database: declare this run's.
        await app.declare(queue(cfg["concurrency"], QUEUE), upsert=True)
        async with Worker(app, register_signal_handlers=False, shutdown_timeout=10):
            await stop.wait()
