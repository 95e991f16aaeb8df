"""One run's view of its workflow job: the recorded steps (loaded once, lazily), the
names used so far, the database's clock, and recording."""

from __future__ import annotations

import asyncio
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from venturi import db
from venturi.codecs import decode_as
from venturi.errors import ClaimLost, ConfigError, VenturiError
from venturi.workflow.suspend import Unreplayable

# Internal records of a primitive live beside its own record, under its name and a
# suffix after this separator; user names may not hold control characters, so the two
# never collide.
SEP = "\x1f"


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
class RunState:
    """What the primitives of one run share. Their statements run on one connection of
    the worker's ``pool``, taken by the run's first primitive and given back when the
    handler ends (``release``): each statement is then one round trip, where a pool's
    acquire and release would add its reset to every step."""

    pool: Any
    schema: str
    job_id: int
    attempt: int
    kind: str
    # Might the run still hold its claim (the worker's view: its heartbeat, its lease)?
    holds: Callable[[], bool] = field(default=lambda: True)
    used: set[str] = field(default_factory=set)
    steps: dict[str, db.workflow.Recorded] | None = None
    # The job's wake_seq as the first primitive read it.
    wake_seq: int = 0
    # The database's clock minus this process's, when the steps were loaded.
    skew: float = 0.0
    # The connection the run holds (None: not taken yet), and whether it came from
    # ``pool.acquire()`` (a worker on one shared connection runs on that instead).
    conn: Any = None
    acquired: bool = False
    # Ids drawn for the run's unkeyed spawns, and the spawns made with them not written
    # yet: written together, by one statement, at the handler's next suspension (a task
    # scheduled by the first of them, so a burst of spawns is one write, and the children
    # run while the handler goes on), before the run's next statement, or at its end.
    spare_ids: list[int] = field(default_factory=list)
    unwritten: list[Unwritten] = field(default_factory=list)
    writing: asyncio.Task[None] | None = None
    write_error: BaseException | None = None
    on_the_wire: bool = False
    # A transactional step's function holds the connection in its transaction: a write
    # of its own then would run beside the function's statements.
    holding: bool = False

    @property
    def shared(self) -> bool:
        """Does the worker run on one shared connection (no transactions of our own)?"""
        return bool(getattr(self.pool, "shares_one_connection", False))

    async def connection(self) -> Any:
        """The run's connection, taken on first use, once the spawns made before are
        written: every statement of a primitive sees the children spawned before it."""
        await self.flush()
        return await self._taken()

    def defer(self, spawn: Unwritten) -> None:
        """Queue a spawn; the first queued schedules their write for the handler's next
        suspension (on one shared connection, whose statements the worker orders, the
        write waits for the run's next statement or its end instead)."""
        self.unwritten.append(spawn)
        if self.writing is None and not self.shared and not self.holding:
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
            await self._write_spawns(await self._taken())

    async def _write_soon(self) -> None:
        try:
            while self.unwritten:
                await self._write_spawns(await self._taken())
        except Exception as exc:  # raised in the run at its next statement or its end
            self.write_error = exc
        finally:
            self.writing = None

    async def _write_spawns(self, conn: Any) -> None:
        batch, self.unwritten = self.unwritten, []
        self.on_the_wire = True
        try:
            recorded = await db.workflow.child_spawn_many(
                conn,
                schema=self.schema,
                parent_id=self.job_id,
                names=[u.name for u in batch],
                ids=[u.child.job_id for u in batch],
                specs=[u.spec for u in batch],
                traceparents=[u.traceparent for u in batch],
            )
        finally:
            self.on_the_wire = False
        for u in batch:
            # Another run of this job recorded the name first (this run lost its claim):
            # its child is the one, and the handle now says so.
            child_id, _ = recorded[u.name]
            u.child.job_id = child_id
            if self.steps is not None:
                self.steps[u.name] = db.workflow.Recorded(str(child_id), None)

    async def _taken(self) -> Any:
        if self.conn is None:
            if self.shared or not hasattr(self.pool, "acquire"):
                self.conn = self.pool
            else:
                self.conn = await self.pool.acquire()
                self.acquired = True
        return self.conn

    async def release(self) -> None:
        """Give the run's connection back to the pool (the handler ended). A write of
        spawns still queued or under way is cancelled first: a handler that returned has
        flushed them, so this one raised or was stopped, and its next run spawns what
        was not written (a write is one statement: all of it committed, or none). Never
        waiting for it keeps a stop prompt on a slow or cut connection."""
        writing = self.writing
        if writing is not None:
            if self.on_the_wire and self.acquired:
                # Its statement is on the wire: the pool's reset would first wait for the
                # server's answer to a cancel request, for ever on a frozen network;
                # closing the connection ends the write at once (the pool opens another).
                self.conn.terminate()
            writing.cancel()
            await asyncio.wait([writing])
        self.unwritten.clear()
        self.write_error = None
        conn, acquired = self.conn, self.acquired
        self.conn, self.acquired = None, False
        if acquired:
            await self.pool.release(conn)

    def still_claimed(self, what: str) -> None:
        """Refuse to start ``what`` (a step's function) in a run whose claim is gone: its
        job may be running elsewhere, where the step may be recorded already; running
        the function here would run it again. ``ClaimLost``: the run ends, unsettled."""
        if not self.holds():
            raise ClaimLost(self.job_id)

    def claim(self, name: object, what: str) -> str:
        """Check ``name`` and mark it used in this run: a name twice is a ConfigError."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ConfigError(
                f"{what}: name must be a non-empty string of at most 200 characters, got {name!r}"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise ConfigError(f"{what}: name must not hold control characters, got {name!r}")
        if name in self.used:
            raise ConfigError(
                f"{what}: the name {name!r} is used twice in one run of job {self.job_id}; "
                "names identify recorded steps and must be unique within the job"
            )
        self.used.add(name)
        return name

    async def load(self) -> dict[str, db.workflow.Recorded]:
        """The recorded steps, read once per run (one statement)."""
        if self.steps is None:
            loaded = await db.workflow.step_list(
                await self.connection(), schema=self.schema, job_id=self.job_id
            )
            self.steps = loaded.steps
            self.wake_seq = loaded.wake_seq
            if loaded.now is not None:
                self.skew = loaded.now.timestamp() - time.time()
        return self.steps

    def now(self) -> datetime:
        """The database's clock, as of the first load (timers are decided by it)."""
        return datetime.fromtimestamp(time.time() + self.skew, UTC)

    def after(self, duration: timedelta | float) -> datetime:
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ConfigError(f"duration must be a non-negative timedelta, got {duration!r}")
        return self.now() + timedelta(seconds=seconds)

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


def return_type(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation (the awaited type of a coroutine function), else Any."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {}) or {}
    annotation = hints.get("return", Any)
    if annotation is None:
        return type(None)
    return annotation if not isinstance(annotation, str) else Any


def decode(text: str, type_: Any, what: str, *, sent: bool = False) -> Any:
    """A recorded JSON value decoded as ``type_``; ``Unreplayable`` naming ``what`` and
    the type when it does not decode: a recorded value that "no longer decodes", or a
    value that was ``sent`` (a signal's payload) and never decoded as that type."""
    try:
        return decode_as(text, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        how = "the payload sent does not decode" if sent else "the recorded value no longer decodes"
        raise Unreplayable(f"{what}: {how} as {_name(type_)}: {exc}") from None
    except TypeError as exc:
        raise VenturiError(
            f"{what}: {_name(type_)} is not a type msgspec can decode: {exc}"
        ) from None


def _name(type_: Any) -> str:
    return getattr(type_, "__qualname__", None) or repr(type_)
