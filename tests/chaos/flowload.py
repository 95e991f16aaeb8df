"""The workflow half of the chaos soak's load (a mixin of ``harness.Harness``): the
signals the harness sends to the flows it enqueued, the three-node Workflows it
enqueues beside the batches, the stuck monitor that samples the waiting jobs while the
soak runs, and the end-of-run reads of the workflow tables for ``workflows.check``."""

from __future__ import annotations

import asyncio
import heapq
import random
import time
from typing import TYPE_CHECKING, Any

import venturi
from venturi import db

from ..support import sql as test_sql
from . import records, tasks, workflows
from .tasks import Chaos

TRANSIENT = db.errors.TRANSIENT
# A flow's signal is sent this long after its enqueue (drawn per flow): before it waits
# for it (the run deciding to wait must see it) as well as after.
SIGNAL_DELAY = (0.0, 3.0)
# The share of producer batches followed by one three-node Workflow.
WORKFLOW_SHARE = 0.4
# How often the stuck monitor samples the waiting jobs.
STUCK_SAMPLE = 1.0


class FlowLoad:
    """What the harness does for workflows; see the module's docstring."""

    # Provided by harness.Harness.
    rng: random.Random
    lock: asyncio.Lock
    conn: Any
    faults: records.Faults
    enqueued: dict[int, int]
    ambiguous: set[int]
    seq: int
    producing: bool

    if TYPE_CHECKING:  # provided by harness.Harness too

        def log(self, message: str) -> None: ...

        async def connect(self) -> None: ...

        async def _drop_conn(self) -> None: ...

    def _flow_init(self) -> None:
        self.flow_seqs: dict[int, int] = {}  # flow job id -> seq (its signal's payload)
        self.signals_due: list[tuple[float, int]] = []
        self.signals_sent: dict[int, bool | None] = {}
        self.workflows: list[dict[str, int]] = []
        self.overdue: list[workflows.Overdue] = []
        self.stuck_logged: set[int] = set()
        self.flow_report = workflows.Report()

    async def _test_fetch(self, name: str) -> list[Any]:
        """A test-only read on the harness connection, reconnecting after a fault."""
        for attempt in range(50):
            async with self.lock:
                try:
                    if self.conn is None or self.conn.is_closed():
                        await self.connect()
                    return list(await self.conn.fetch(test_sql.statement(name)))
                except TRANSIENT:
                    if attempt == 49:
                        raise
                    await self._drop_conn()
            await asyncio.sleep(0.2)  # stays: the interval of a bounded retry
        raise AssertionError("unreachable")

    async def create_side_table(self) -> None:
        await self.conn.execute(test_sql.statement("chaos_effects_create"))

    # --- the producer's part ---------------------------------------------------------

    def flows_enqueued(self, batch: list[tuple[int, Any]], ids: list[int]) -> None:
        """Schedule the signal of every flow of a batch just enqueued."""
        now = time.time()
        for (seq, spec), job_id in zip(batch, ids, strict=True):
            if spec.kind == "chaos_flow":
                self.flow_seqs[job_id] = seq
                heapq.heappush(self.signals_due, (now + self.rng.uniform(*SIGNAL_DELAY), job_id))

    async def maybe_enqueue_workflow(self) -> None:
        if self.rng.random() >= WORKFLOW_SHARE:
            return
        seqs = {}
        wf = venturi.Workflow()
        for name in ("a", "b", "c"):
            self.seq += 1
            seqs[name] = self.seq
        a = wf.add("a", tasks.node.job(Chaos(seqs["a"], name="a")))
        b = wf.add("b", tasks.node.job(Chaos(seqs["b"], name="b")), after=[a])
        wf.add("c", tasks.node.job(Chaos(seqs["c"], name="c")), after=[a, b])
        for attempt in range(1, 100):
            async with self.lock:
                try:
                    if self.conn is None or self.conn.is_closed():
                        await self.connect()
                    async with self.conn.transaction():
                        ids = await wf.enqueue(self.conn)
                    break
                except TRANSIENT as exc:
                    self.ambiguous.update(seqs.values())
                    self.log(f"Workflow enqueue failed ({exc}); sending it again")
                    await self._drop_conn()
            await asyncio.sleep(min(0.1 * attempt, 2.0))  # stays: backoff of a bounded retry
        else:
            raise RuntimeError("could not enqueue a Workflow")
        for name, job_id in ids.items():
            self.enqueued[job_id] = seqs[name]
        self.workflows.append(ids)

    # --- signals -----------------------------------------------------------------------

    async def send_signals(self) -> None:
        """Send each flow its signal when due, until the producer stopped and every
        signal was sent."""
        while self.producing or self.signals_due:
            if not self.signals_due or self.signals_due[0][0] > time.time():
                await asyncio.sleep(0.05)  # stays: polls the signal timetable
                continue
            _, job_id = heapq.heappop(self.signals_due)
            self.signals_sent[job_id] = await self._signal(job_id)

    async def _signal(self, job_id: int) -> bool | None:
        """True: recorded; False: refused; None: unknown (a try whose commit was
        ambiguous, then a refusal, which may be that commit's)."""
        ambiguous = False
        for attempt in range(1, 60):
            async with self.lock:
                try:
                    if self.conn is None or self.conn.is_closed():
                        await self.connect()
                    sent = await venturi.signal(
                        self.conn, job_id, tasks.FLOW_SIGNAL, self.flow_seqs[job_id]
                    )
                    return True if sent else (None if ambiguous else False)
                except TRANSIENT:
                    ambiguous = True
                    await self._drop_conn()
            await asyncio.sleep(min(0.1 * attempt, 1.0))  # stays: backoff of a bounded retry
        return None

    # --- the stuck monitor ---------------------------------------------------------------

    async def watch_waiting(self) -> None:
        """Sample the waiting jobs whose wake condition holds (until cancelled)."""
        while True:
            await asyncio.sleep(STUCK_SAMPLE)  # stays: the monitor's sampling interval
            try:
                rows = await self._test_fetch("chaos_waiting_overdue")
            except TRANSIENT:
                continue
            held = [
                (r["id"], r["kind"], r["why"], _ts(r["since"]), r["now"].timestamp()) for r in rows
            ]
            sample = workflows.overdue(held, self.faults.connection)
            for o in sample:
                if o.held > o.bound and o.job not in self.stuck_logged:
                    self.stuck_logged.add(o.job)
                    self.log(f"STUCK? job {o.job} ({o.kind}) waiting while {o.why} {o.held:.1f}s")
            self.overdue += [o for o in sample if o.held > 1.0]

    # --- the end-of-run check -------------------------------------------------------------

    async def check_workflows(self, jobs: list[records.Job], lines: list[str]) -> None:
        steps = [
            workflows.StepRow(r["job_id"], r["name"], r["value"], r["recorded_at"].timestamp())
            for r in await self._test_fetch("chaos_steps")
        ]
        effects = [
            workflows.Effect(r["job_id"], r["step"], r["pid"], r["attempt"])
            for r in await self._test_fetch("chaos_effects")
        ]
        children = [
            workflows.Child(r["id"], r["parent_id"], r["kind"], r["status"], r["name"])
            for r in await self._test_fetch("chaos_children")
        ]
        signals = {
            r["job_id"]: r["payload"]
            for r in await self._test_fetch("chaos_signals")
            if r["name"] == tasks.FLOW_SIGNAL
        }
        self.flow_report = workflows.check(
            kinds={j.id: j.kind for j in jobs},
            statuses={j.id: j.status for j in jobs},
            lines=workflows.parse_lines(lines),
            steps=steps,
            effects=effects,
            children=children,
            signals=signals,
            sent=self.signals_sent,
            seqs=self.flow_seqs,
            workflows=self.workflows,
            samples=self.overdue,
        )

    def flow_rows(self) -> list[tuple[str, Any]]:
        r = self.flow_report
        return [
            ("workflow jobs: flows / children / Workflow nodes", f"{r.flows} / {r.children} / {r.nodes}"),
            ("flows completed", r.flows_completed),
            ("three-node Workflows enqueued / completed", f"{r.workflows} / {r.workflows_completed}"),
            ("steps recorded (functions) / their runs", f"{r.steps_recorded} / {r.step_fn_runs}"),
            ("... runs before the record committed (at least once)", r.step_fn_runs_before_commit),
            ("recorded steps run again", r.steps_run_again),
            ("transactional writes / not exactly once", f"{r.tx_writes} / {r.tx_writes_wrong}"),
            ("durable sleeps recorded", r.timers),
            ("workflow runs failed by a database error (a fault cut a statement)", r.runs_cut),
            ("children spawned twice / not the recorded one", f"{r.children_twice} / {r.children_unrecorded}"),
            ("gathers returned / children gathered", f"{r.gathers} / {r.children_gathered}"),
            ("signals sent (recorded / refused / unknown)",
             f"{r.signals_sent} / {r.signals_refused} / "
             f"{sum(1 for v in self.signals_sent.values() if v is None)}"),
            ("signals recorded / delivered (seen by their job)", f"{r.signals_recorded} / {r.signals_delivered}"),
            ("signals lost", r.signals_lost),
            (f"workflows stuck (wake condition held > {workflows.STUCK_BOUND:.0f} s + faults)", r.stuck),
            ("longest a wake condition held on a waiting job", f"{r.longest_held:.1f} s"),
        ]  # fmt: skip


def _ts(at: Any) -> float | None:
    return None if at is None else float(at.timestamp())
