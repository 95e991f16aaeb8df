"""The grouped half of the chaos soak's load (a mixin of ``harness.Harness``; docs/chaos.md,
"Groups in the soak"): worker processes of their own (``GROUP_MODULE``) beside the ordinary
workers, which run them too (``ALL_MODULE``), grouped jobs of ``chaos_group1`` (group_cap 1)
and ``chaos_group3`` (group_cap 3) spread over a few groups with unequal shares and
weights, bursts into one group now and then, caps lowered with ``venturi.set_group`` while
the workers run, the ledger read at the end and ``groupcheck.check``."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import venturi
from venturi import db
from venturi.runtime.recovery import RECOVER_EVERY

from ..support import sql as test_sql
from . import groupcheck, grouptasks, records
from .ledger import DSN_ENV
from .tasks import Chaos

TRANSIENT = db.errors.TRANSIENT
# What the soak's workers run: the grouped kinds' own workers GROUP_MODULE; the others
# every kind (ALL_MODULE) when the grouped kinds are in the load, else TASKS_MODULE.
TASKS_MODULE = "tests.chaos.tasks"
GROUP_MODULE = "tests.chaos.grouptasks"
ALL_MODULE = "tests.chaos.alltasks"

GROUPS = ("t0", "t1", "t2", "t3", "t4")
# How often each group is drawn (a skew: t0 is hot), and the weights set at the start.
SHARES = (35, 25, 15, 15, 10)
WEIGHTS = {"t0": 3.0, "t1": 2.0}
# The share of a grouped kind's jobs enqueued without a group (SPEC 13: one group of
# their own beside the groups, runtime/shares.py). No cap holds them: their runs write no
# ledger record.
UNGROUPED_SHARE = 0.1
# A grouped job works this long (ms), or, its first run, past the 4 s lease (a zombie).
WORK_MS = (200, 1500)  # long enough that a SIGKILL often finds a grouped slot held
OVERRUN_SHARE = 0.02
OVERRUN_MS = (grouptasks.GROUP_OVERRUN, grouptasks.GROUP_OVERRUN + 1500)
# The share of producer batches followed by a burst of BURST jobs into one group; of the
# bursts, the share that goes into a group first seen (NEW_GROUP and the job's number):
# claims racing to insert a group's row meet under the faults all along, not only at
# the start.
BURST_SHARE = 0.08
BURST = 6
NEW_BURST_SHARE = 1 / 3
NEW_GROUP = "new"
# The most grouped jobs enqueued per second of load, each kind (bursts included): a
# group's capacity is fixed (its cap over the work's mean, about 1.2 runs a second per
# slot), where the producer's pace is the machine's. Unpaced, a fast machine enqueued
# 365 jobs of chaos_group1 in 60 s, 128 of them into t0 alone: 110 s of serial work
# for one slot, more than the load and the drain together, and CI failed with 13 of
# them pending. Paced, t0 of chaos_group1 is busy about 2/3 of the time on any machine
# (chaos_group3's t0, lowered to cap 1 at 40 %, about all of it).
GROUP_PACE = {"chaos_group1": 2.0, "chaos_group3": 2.5}
# Caps lowered while running: (share of the load's seconds, kind, group, new cap).
LOWERINGS = ((0.4, "chaos_group3", "t0", 1), (0.6, "chaos_group3", "t1", 2))


class GroupLoad:
    """What the harness does for groups; see the module's docstring."""

    # Provided by harness.Harness.
    rng: random.Random
    lock: asyncio.Lock
    conn: Any
    faults: records.Faults
    seq: int
    t_start: float
    cfg: Any
    workers: list[Any]

    if TYPE_CHECKING:  # provided by harness.Harness too

        def log(self, message: str) -> None: ...

        async def connect(self) -> None: ...

        async def _drop_conn(self) -> None: ...

        async def _test_fetch(self, name: str) -> list[Any]: ...

    def _group_init(self) -> None:
        self.group_of_job: dict[int, tuple[str, str]] = {}
        self.grouped_drawn: Counter[str] = Counter()
        self.cap_changes: list[groupcheck.CapChange] = []
        self.group_report = groupcheck.Report()
        self.ledger_dsn = ""

    def ledger_env(self) -> dict[str, str]:
        return {DSN_ENV: self.ledger_dsn}

    # --- the producer's part ---------------------------------------------------------

    def group_for(self, kind: str) -> str | None:
        if kind not in grouptasks.GROUP_CAPS:
            return None
        self.grouped_drawn[kind] += 1
        if self.rng.random() < UNGROUPED_SHARE:
            return None
        return str(self.rng.choices(GROUPS, weights=SHARES)[0])

    def grouped_paced(self, kind: str) -> bool:
        """Whether a job of grouped kind ``kind`` would run ahead of GROUP_PACE (the
        producer then draws an ungrouped kind instead)."""
        allowed = GROUP_PACE[kind] * max(0.0, time.time() - self.t_start)
        return self.grouped_drawn[kind] >= allowed

    def group_ms(self) -> int:
        if self.rng.random() < OVERRUN_SHARE:
            return self.rng.randint(*OVERRUN_MS)
        return self.rng.randint(*WORK_MS)

    def grouped_burst(self) -> list[tuple[int, Any]]:
        """Now and then, a burst of jobs into one group (it then sits at its cap)."""
        if not self.cfg.group_workers or self.rng.random() >= BURST_SHARE:
            return []
        kind = self.rng.choice(sorted(grouptasks.GROUP_CAPS))
        group = self.rng.choice(GROUPS)
        if self.rng.random() < NEW_BURST_SHARE:
            group = f"{NEW_GROUP}{self.seq + 1}"
        if self.grouped_paced(kind):
            return []
        self.grouped_drawn[kind] += BURST
        out = []
        for _ in range(BURST):
            self.seq += 1
            job = grouptasks.GROUP_TASKS[kind].job(Chaos(self.seq, ms=self.group_ms()), group=group)
            out.append((self.seq, job))
        return out

    def groups_enqueued(self, batch: list[tuple[int, Any]], ids: list[int]) -> None:
        for (_, spec), job_id in zip(batch, ids, strict=True):
            if spec.kind in grouptasks.GROUP_CAPS and spec.group is not None:
                self.group_of_job[job_id] = (spec.kind, spec.group)

    # --- settings while running -------------------------------------------------------

    async def create_ledger(self) -> None:
        await self.conn.execute(test_sql.statement("chaos_ledger_create"))
        for kind in grouptasks.GROUP_CAPS:
            for group, weight in WEIGHTS.items():
                await venturi.set_group(self.conn, kind, group, weight=weight)

    async def lower_caps(self, seconds: float) -> None:
        """Lower caps at their times; each change's instant is the database's clock read
        in its transaction after the group's row was written (its lock held: no claim of
        that group can land between the two)."""
        for share, kind, group, cap in LOWERINGS:
            delay = self.t_start + seconds * share - time.time()
            if delay > 0:
                await asyncio.sleep(delay)  # stays: the changes follow a timetable
            for attempt in range(1, 100):
                async with self.lock:
                    try:
                        if self.conn is None or self.conn.is_closed():
                            await self.connect()
                        async with self.conn.transaction():
                            await venturi.set_group(self.conn, kind, group, cap=cap)
                            at = await self.conn.fetchval(test_sql.statement("clock_now"))
                        break
                    except TRANSIENT as exc:
                        self.log(f"set_group failed ({exc}); again")
                        await self._drop_conn()
                await asyncio.sleep(min(0.1 * attempt, 1.0))  # stays: backoff of a retry
            else:
                raise RuntimeError("could not lower a cap")
            self.cap_changes.append(groupcheck.CapChange(kind, group, at.timestamp(), cap))
            self.log(f"set_group {kind} {group} cap={cap} (was {grouptasks.GROUP_CAPS[kind]})")

    # --- the end-of-run check -----------------------------------------------------------

    async def check_groups(
        self, jobs: list[records.Job], events: list[records.Event], lines: list[str]
    ) -> None:
        ledger = [
            groupcheck.Record(
                r["job_id"], r["attempt"], r["phase"], r["pid"], r["kind"], r["grp"],
                r["at"].timestamp(), r["claim_token"], _ts(r["claimed_at"]),
                _ts(r["claim_expires_at"]),
            )
            for r in await self._test_fetch("chaos_ledger")
        ]  # fmt: skip
        # The grouped kinds' jobs in a group (their jobs without one hold no cap's slot).
        grouped = {j.id: j for j in jobs if j.kind in grouptasks.GROUP_CAPS and j.grp is not None}
        mine: dict[int, list[records.Event]] = {}
        for e in sorted(events, key=lambda e: e.at):
            if e.job in grouped:
                mine.setdefault(e.job, []).append(e)
        claims: dict[int, dict[int, records.Claim]] = {}
        for job_id, job in grouped.items():
            try:
                claims[job_id] = records.claims_of(job, mine.get(job_id, []))
            except ValueError:
                continue  # the main check reports a journal it cannot read
        deaths = {w.proc.pid: w.exited for w in self.workers if w.exited is not None}
        windows = list(self.faults.connection) + list(getattr(self, "windows", {}).values())
        self.group_report = groupcheck.check(
            ledger,
            lines,
            claims,
            {j: self.group_of_job.get(j, (grouped[j].kind, "?")) for j in grouped},
            self.faults,
            deaths,
            windows=windows,
            caps=grouptasks.GROUP_CAPS,
            changes=self.cap_changes,
            leases={k: t.lease or self.cfg.lease for k, t in grouptasks.GROUP_TASKS.items()},
            recover_every=min(self.cfg.poll_max, RECOVER_EVERY),
        )

    def group_rows(self) -> list[tuple[str, Any]]:
        enqueued = Counter(kind for kind, _ in self.group_of_job.values())
        return groupcheck.rows(self.group_report, dict(enqueued), self.cap_changes)


def _ts(at: Any) -> float | None:
    return None if at is None else float(at.timestamp())
