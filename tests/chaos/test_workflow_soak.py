"""The chaos soak's workflow checks (``tests/chaos/workflows.py``) proven on made-up
histories (each must catch its wrong history, or a green soak means nothing), and the
library bug the workflow soak found, pinned by a deterministic test."""

from __future__ import annotations

import asyncio
import copy
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

import venturi
from tests.chaos import workflows
from tests.chaos.workflows import Child, Effect, Line, Overdue, StepRow
from tests.support import Item, events, running, wait_status
from venturi import Context
from venturi.runtime.worker import Worker


def clean() -> dict[str, Any]:
    """A right history: flow 1 (a step recorded at 10.0, run once before a crash and
    once more before the record committed; a transactional step; a child per step name;
    its signal seen), and one three-node Workflow (7, 8, 9) completed."""
    return {
        "kinds": {1: "chaos_flow", 2: "chaos_child", 3: "chaos_child", 7: "chaos_node",
                  8: "chaos_node", 9: "chaos_node"},
        "statuses": dict.fromkeys((1, 2, 3, 7, 8, 9), "completed"),
        "lines": [
            Line("X", 1, "plain", 100, "1", 9.0),  # killed before its record
            Line("X", 1, "plain", 200, "2", 9.9),
            Line("R", 1, "plain", 200, "2", 10.1),
            Line("R", 1, "plain", 200, "3", 12.0),  # a replay returns the record
            Line("X", 1, "in-transaction", 200, "2", 10.2),
            Line("R", 1, "in-transaction", 200, "2", 10.3),
            Line("G", 1, "go", 200, "41", 13.0),
            Line("C", 1, "2", 200, "4", 15.0),
            Line("N", 9, "c", 200, "1", 16.0),
        ],
        "steps": [
            StepRow(1, "plain", '"2:200"', 10.0),
            StepRow(1, "in-transaction", '"2:200"', 10.15),
            StepRow(1, "nap", "null", 10.4),
            StepRow(1, "kid-0", "2", 14.0),
            StepRow(1, "kid-1", "3", 14.0),
        ],
        "effects": [Effect(1, "in-transaction", 200, 2)],
        "children": [Child(2, 1, "chaos_child", "completed", "kid-0"),
                     Child(3, 1, "chaos_child", "completed", "kid-1")],
        "signals": {1: "41"},
        "sent": {1: True},
        "seqs": {1: 41},
        "workflows": [{"a": 7, "b": 8, "c": 9}],
        "samples": [Overdue(1, "chaos_flow", "timer due", 2.0, 10.0)],
    }  # fmt: skip


def check(h: dict[str, Any]) -> workflows.Report:
    return workflows.check(**h)


def test_a_right_workflow_history_passes_and_is_counted() -> None:
    rep = check(clean())
    assert rep.violations == []
    assert (rep.flows, rep.children, rep.nodes, rep.workflows) == (1, 2, 3, 1)
    assert (rep.steps_recorded, rep.step_fn_runs, rep.step_fn_runs_before_commit) == (2, 3, 1)
    assert (rep.gathers, rep.children_gathered) == (1, 2)
    assert (rep.signals_sent, rep.signals_recorded, rep.signals_delivered) == (1, 1, 1)
    assert rep.workflows_completed == 1 and rep.timers == 1 and rep.longest_held == 2.0
    assert (rep.steps_run_again, rep.children_twice, rep.signals_lost, rep.stuck) == (0, 0, 0, 0)


def _add(key: str, value: Any) -> Any:
    return lambda h: h[key].append(value)


@pytest.mark.parametrize(
    ("mutate", "expected", "counter"),
    [
        # A recorded step's function started after a run had returned its record.
        (_add("lines", Line("X", 1, "plain", 300, "4", 10.5)), "started again", "steps_run_again"),
        # ... after its recorded_at, when no run lived to return it.
        (lambda h: h["lines"].__setitem__(2, Line("X", 1, "plain", 300, "3", 10.05))
         or h["lines"].__setitem__(3, Line("R", 9, "x", 1, "1", 1.0)),
         "started again", "steps_run_again"),
        # A transactional step's write committed twice, or without its record.
        (_add("effects", Effect(1, "in-transaction", 300, 3)), "2 transactional writes",
         "tx_writes_wrong"),
        (lambda h: h["steps"].pop(1), "not recorded, yet its transactional write", "tx_writes_wrong"),
        # Two children for one parent and step name.
        (_add("children", Child(4, 1, "chaos_child", "completed", "kid-0")), "2 children for step",
         "children_twice"),
        # A child that is not the one its parent recorded.
        (lambda h: h["steps"].__setitem__(3, StepRow(1, "kid-0", "5", 14.0)),
         "not the child its step recorded", "children_unrecorded"),
        # A signal recorded that its job never saw.
        (lambda h: h["lines"].pop(6), "its signal was recorded", "signals_lost"),
        # A signal the harness was told was recorded, absent from the table.
        (lambda h: h["signals"].pop(1) and h["lines"].pop(6), "the signals table has none",
         "signals_lost"),
        # A job that saw its signal but never completed.
        (lambda h: h["statuses"].__setitem__(1, "waiting"), "its signal was recorded",
         "signals_lost"),
        # A waiting job whose wake condition held past its bound.
        (_add("samples", Overdue(1, "chaos_flow", "signal go sent", 12.0, 10.0)),
         "a workflow stuck", "stuck"),
    ],
)  # fmt: skip
def test_each_wrong_workflow_history_is_caught(mutate: Any, expected: str, counter: str) -> None:
    h = copy.deepcopy(clean())
    mutate(h)
    rep = check(h)
    assert any(expected in v for v in rep.violations), rep.violations
    assert getattr(rep, counter) >= 1


def test_the_stuck_bound_grows_with_the_fault_windows_it_overlaps() -> None:
    rows = [(1, "chaos_flow", "timer due", 100.0, 125.0)]
    assert workflows.overdue(rows, [])[0].bound == workflows.STUCK_BOUND
    # A restart of 3 s inside the span, one outside; an open-ended black-hole counts
    # FAULT_CAP at most.
    windows = [(110.0, 113.0), (130.0, 131.0), (90.0, float("inf"))]
    sample = workflows.overdue(rows, windows)[0]
    assert sample.held == 25.0
    assert sample.bound == workflows.STUCK_BOUND + 3.0 + 25.0


# --- the library bug the workflow soak found ------------------------------------------


async def test_a_due_timer_wakes_while_a_backlog_keeps_every_slot_busy(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """The soak's first run found flows waiting on a due timer for 15 s and more: a
    worker looked for due timers only when a claim came up short (idle slots), so while
    a backlog kept its slots full a sleeping workflow waited for the whole backlog to
    drain. Now a busy loop looks for them every ``poll_max``."""

    @venturi.task(kind="wf_soak_busy")
    async def busy(ctx: Context[Any], carry: Item) -> None:
        await asyncio.sleep(0.02)  # stays: a backlog that takes seconds to drain

    @venturi.task(kind="wf_soak_sleeper")
    async def sleeper(ctx: Context[Any], carry: Item) -> None:
        # stays: a timer that really comes due behind the backlog is the subject
        await ctx.sleep("nap", timedelta(milliseconds=100))

    flow_id = await sleeper.enqueue(conn, Item(0))
    await venturi.enqueue_many(conn, [busy.job(Item(i)) for i in range(1000)])
    async with running(Worker(None, dsn, [sleeper, busy], concurrency=2, poll_max=0.2)):
        await wait_status(conn, flow_id, "completed", within=120)
        pending = await conn.fetchval(
            "SELECT count(*) FROM venturi.jobs WHERE kind = 'wf_soak_busy' AND status = 'pending'"
        )
    # Woken while the backlog was still there (before the fix: only once it drained).
    assert pending > 0


async def test_a_connection_cut_after_the_last_primitive_keeps_the_runs_outcome(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """The soak's second run found a flow whose gather had decided to wait settled
    failed: a backend kill cut the connection the run's primitives held, and giving it
    back to the pool when the handler ended raised, which replaced the run's outcome
    (waiting, or a completion) with a failure. The connection is given back quietly now."""
    pids: list[int] = []

    async def remember(tx: asyncpg.Connection) -> int:
        pids.append(tx.get_server_pid())
        return len(pids)

    @venturi.task(kind="wf_soak_cut")
    async def flow(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        await ctx.step("remember", remember, transactional=True)
        # The backend of the run's connection is terminated after its last primitive
        # (from a connection of its own: the test's is busy waiting for the status).
        killer = await asyncpg.connect(dsn)
        try:
            await killer.fetchval("SELECT pg_terminate_backend($1)", pids[-1])
        finally:
            await killer.close()
        return venturi.complete("done")

    job_id = await flow.enqueue(conn, Item(1))
    async with running(Worker(None, dsn, [flow], poll_max=0.2)):
        await wait_status(conn, job_id, "completed", within=60)
    journal = await venturi.get_journal(conn, job_id)
    assert "failed" not in events(journal), [(e.event, (e.detail or "")[-700:]) for e in journal]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.attempt == 1 and job.failures == 0
