"""``WorkflowRun``: one run of a workflow job as its primitives see it, which the worker
makes at the run's first primitive and ``Context`` passes to each (``steps.step``,
``timers.sleep_until``, ``signals.wait_for_signal``, ``children.spawn``...). It holds
the run's records, its connection and its spawns' write-behind, each its own object, and
the reads and writes that need more than one of them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from venturi import db
from venturi.errors import ClaimLost
from venturi.workflow.connection import RunConnection
from venturi.workflow.records import Records
from venturi.workflow.spawn_writes import SpawnWrites


class WorkflowRun:
    """The run of job ``job_id`` on the worker's ``pool`` (tables in ``schema``);
    ``holds``: might the run still hold its claim (the worker's view: its heartbeat, its
    lease)?"""

    __slots__ = ("holds", "job_id", "link", "records", "schema", "spawns")

    def __init__(
        self,
        pool: Any,
        schema: str,
        job_id: int,
        holds: Callable[[], bool] = lambda: True,
    ) -> None:
        self.schema = schema
        self.job_id = job_id
        self.holds = holds
        self.records = Records(job_id)
        self.link = RunConnection(pool)
        self.spawns = SpawnWrites(self.link, self.records, schema, job_id)

    async def connection(self) -> Any:
        """The run's connection, once the spawns made before are written: every
        statement of a primitive sees the children spawned before it."""
        await self.spawns.flush()
        return await self.link.taken()

    async def load(self) -> dict[str, db.workflow.Recorded]:
        """The recorded steps, read once per run (one statement)."""
        steps = self.records.steps
        if steps is None:
            conn = await self.connection()
            loaded = await db.workflow.step_list(conn, schema=self.schema, job_id=self.job_id)
            steps = self.records.loaded(loaded)
        return steps

    async def record(
        self, name: str, value: str, wake_at: datetime | None = None
    ) -> db.workflow.Recorded:
        """Record ``name`` (once: another run's earlier record wins and is returned)."""
        steps = await self.load()
        recorded, _ = await db.workflow.step_record(
            await self.connection(),
            schema=self.schema,
            job_id=self.job_id,
            name=name,
            value=value,
            wake_at=wake_at,
        )
        steps[name] = recorded
        return recorded

    def still_claimed(self, what: str) -> None:
        """Refuse to start ``what`` (a step's function) in a run whose claim is gone: its
        job may be running elsewhere, where the step may be recorded already; running
        the function here would run it again. ``ClaimLost``: the run ends, unsettled."""
        if not self.holds():
            raise ClaimLost(self.job_id)

    async def release(self) -> None:
        """The handler ended: drop its spawns not written (a handler that returned has
        written them, so this one raised or was stopped) and give its connection back."""
        await self.spawns.abandon()
        await self.link.give_back()
