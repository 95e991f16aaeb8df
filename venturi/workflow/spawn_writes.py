"""The write-behind of one run's unkeyed spawns. Their ids are drawn at once, so a
``Child`` knows its id; the spawns made with them are written together, by one
statement, at the handler's next suspension (a task scheduled by the first of them, so a
burst of spawns is one write and the children run while the handler goes on), before
the run's next statement, or at its end."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from venturi import db
from venturi.workflow.connection import RunConnection
from venturi.workflow.records import Records


@dataclass
class Unwritten:
    """A spawn made with a drawn id and not written yet: its step name, the child's
    spec and trace context, and the ``Child`` handed out (whose id the write may
    replace with another run's recorded one)."""

    name: str
    spec: Any
    traceparent: str | None
    child: Any


@dataclass
class SpawnWrites:
    """The unwritten spawns of job ``parent_id``'s run, written on ``link`` (the run's
    connection), each recorded in ``records`` once written."""

    link: RunConnection
    records: Records
    schema: str
    parent_id: int
    # Ids drawn for the run's unkeyed spawns and not used yet.
    spare_ids: list[int] = field(default_factory=list)
    unwritten: list[Unwritten] = field(default_factory=list)
    writing: asyncio.Task[None] | None = None
    write_error: BaseException | None = None
    on_the_wire: bool = False

    def defer(self, spawn: Unwritten) -> None:
        """Queue a spawn; the first queued schedules their write for the handler's next
        suspension (on one shared connection, whose statements the worker orders, the
        write waits for the run's next statement or its end instead)."""
        self.unwritten.append(spawn)
        if self.writing is None and not self.link.shared and not self.link.holding:
            self.writing = asyncio.get_running_loop().create_task(self._write_soon())

    async def flush(self) -> None:
        """Write the spawns not written yet, after any write under way; raise what that
        write met (the handler returned, a primitive or a transaction of its own is
        about to run)."""
        writing = self.writing
        if writing is not None:
            await asyncio.shield(writing)
        if self.write_error is not None:
            exc, self.write_error = self.write_error, None
            raise exc
        if self.unwritten:
            await self._write(await self.link.taken())

    async def _write_soon(self) -> None:
        try:
            while self.unwritten:
                await self._write(await self.link.taken())
        except Exception as exc:  # raised in the run at its next statement or its end
            self.write_error = exc
        finally:
            self.writing = None

    async def _write(self, conn: Any) -> None:
        batch, self.unwritten = self.unwritten, []
        self.on_the_wire = True
        try:
            recorded = await db.workflow.child_spawn_many(
                conn,
                schema=self.schema,
                parent_id=self.parent_id,
                names=[u.name for u in batch],
                ids=[u.child.job_id for u in batch],
                specs=[u.spec for u in batch],
                traceparents=[u.traceparent for u in batch],
            )
        finally:
            self.on_the_wire = False
        steps = self.records.steps
        for u in batch:
            # Another run of this job recorded the name first (this run lost its claim):
            # its child is the one, and the handle now says so.
            child_id, _ = recorded[u.name]
            u.child.job_id = child_id
            if steps is not None:
                steps[u.name] = db.workflow.Recorded(str(child_id), None)

    async def abandon(self) -> None:
        """Drop the spawns not written (the handler ended without returning: its next
        run spawns them again), cancelling a write under way: a write is one statement,
        all of it committed or none. Never waiting for it keeps a stop prompt on a slow
        or cut connection."""
        writing = self.writing
        if writing is not None:
            if self.on_the_wire:
                self.link.close_now()
            writing.cancel()
            await asyncio.wait([writing])
        self.unwritten.clear()
        self.write_error = None
