"""DBOS Transact's workflows (https://pypi.org/project/dbos/) for ``benchmarks.scenarios.workflows``.

The two workflows, written the way DBOS documents them:

- ``three``: an async ``@DBOS.workflow`` calling three async ``@DBOS.step`` functions in
  turn (each step's output checkpointed in ``dbos.operation_outputs``);
- ``fanout``: an async workflow that enqueues ten child workflows on a DBOS ``Queue``
  (``enqueue_async``, its fan-out pattern), then awaits each child's handle
  (``get_result``) and sums the results.

Parents are enqueued from outside through ``DBOSClient`` (all of a run's in one
transaction, ``enqueue_in_transaction``) on the queue ``wf``; the children go to a queue
of their own, ``wf_children``. Both queues have ``worker_concurrency`` = the run's
concurrency. One queue for both would deadlock: a DBOS parent waiting on ``get_result``
keeps its queue slot (and a thread of its event loop polling), so ``c`` waiting parents
would leave no slot for their children. DBOS therefore runs up to ``2c`` workflows at
once where venturi runs ``c`` jobs (its waiting parents give up their slots).

Fastest documented settings: async workflows and steps (no thread per workflow); the
queues' ``polling_interval_sec`` (1 s by default; the docs require only a positive
value) and the handles' ``get_result(polling_interval_sec=...)`` (1 s by default) both
lowered, to 10 ms and to 1 ms (``cfg["poll"]``; ``benchmarks.scenarios.workflows`` runs both and the
faster counts); LISTEN/NOTIFY on (its default).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from benchmarks import probe
from benchmarks.systems.dbos import APP
from benchmarks.systems.dbos import Client as PlainClient

QUEUE = "wf"
CHILD_QUEUE = "wf_children"
WORKFLOWS = {"three": "bench_wf_three", "fanout": "bench_wf_fanout"}
POLL = 0.01
CHILDREN = 10

_queues: dict[str, Any] = {}


def _registered(poll: float) -> None:
    from dbos import DBOS

    @DBOS.step(name="bench_step_a")
    async def step_a(i: int) -> int:
        return i + 1

    @DBOS.step(name="bench_step_b")
    async def step_b(i: int) -> int:
        return i * 2

    @DBOS.step(name="bench_step_c")
    async def step_c(i: int) -> int:
        return i - 1

    @DBOS.workflow(name=WORKFLOWS["three"])
    async def three(i: int) -> int:
        probe.begin()
        out = await step_c(await step_b(await step_a(i)))
        probe.report(i)
        return out

    @DBOS.workflow(name="bench_wf_child")
    async def child(n: int) -> int:
        return n

    @DBOS.workflow(name=WORKFLOWS["fanout"])
    async def fanout(i: int) -> int:
        probe.begin()
        queue = _queues[CHILD_QUEUE]
        handles = [await queue.enqueue_async(child, i * CHILDREN + k) for k in range(CHILDREN)]
        total = 0
        for handle in handles:
            total += await handle.get_result(polling_interval_sec=poll)
        probe.report(i)
        return total


class Client(PlainClient):
    """The harness's side: DBOS's system database, the parents enqueued in bulk."""

    def _enqueue_scenario(self, scenario: str, n: int) -> None:
        options = {
            "queue_name": QUEUE,
            "workflow_name": WORKFLOWS[scenario],
            "application_name": APP,
        }
        with self.engine.begin() as conn:
            for i in range(n):
                self.client.enqueue_in_transaction(conn, options, i)

    async def enqueue_workflows(self, scenario: str, n: int) -> None:
        await asyncio.to_thread(self._enqueue_scenario, scenario, n)


async def worker(dsn: str, cfg: dict[str, Any], stop: asyncio.Event) -> None:
    from dbos import DBOS

    probe.hand_over(asyncio.get_running_loop())
    logging.getLogger("dbos").setLevel(logging.WARNING)
    poll = cfg.get("poll", POLL)
    _registered(poll)

    def start() -> None:
        # DBOS's synchronous API refuses a thread with a running event loop.
        DBOS(config={"name": APP, "system_database_url": dsn, "log_level": "WARNING"})
        DBOS.launch()
        for name in (QUEUE, CHILD_QUEUE):
            _queues[name] = DBOS.register_queue(
                name,
                worker_concurrency=cfg["concurrency"],
                polling_interval_sec=poll,
                on_conflict="always_update",
            )

    await asyncio.to_thread(start)
    try:
        await stop.wait()
    finally:
        await asyncio.to_thread(DBOS.destroy)
