"""Recurring jobs: schedules, and the maintenance task that enqueues their slots.

A schedule is a task, a cron expression read in a time zone, and the carry its jobs get.
Declare one with ``@venturi.task(..., cron="*/5 * * * *", tz="Europe/Paris")`` (its name
is the kind) or ``venturi.schedule(task, cron, carry)``; a worker with
``maintenance=[venturi.CronScheduler()]`` enqueues the schedules of its kinds.

Each slot is enqueued exactly once however many workers tick: the worker that moves the
schedule's row in ``<schema>.schedules`` to the slot enqueues the slot's job in the same
transaction, and the others find the row already there. After downtime, the missed slots
are coalesced into one catch-up job for the latest of them. A schedule seen for the
first time starts with its next slot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from venturi import db
from venturi.cronspec import CronSpec
from venturi.errors import ConfigError
from venturi.priority import Priority
from venturi.tasks import Task, as_priority, default_cron_carry, registered
from venturi.validate import seconds

log = logging.getLogger("venturi.cron")

DEFAULT_INTERVAL = 1.0

_NO_CARRY: Any = object()


class Schedule:
    """One recurring schedule: its unique ``name``, ``task``, ``spec`` and ``carry``."""

    __slots__ = ("carry", "carry_text", "name", "priority", "spec", "task")

    def __init__(
        self,
        name: str,
        task: Task[Any],
        spec: CronSpec,
        carry: Any,
        priority: Priority | None = None,
    ) -> None:
        self.name = name
        self.task = task
        self.spec = spec
        self.carry = carry
        self.priority = priority
        try:
            # Checked now, so a bad carry fails where the schedule is declared.
            self.carry_text = task.codec.encode(carry)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"schedule {name!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"<venturi.Schedule {self.name!r}: {self.task.kind} at {self.spec!r}>"

    def key(self, slot: datetime) -> str:
        """The de-duplication key of the job of ``slot``: ``cron:<name>:<slot in UTC>``."""
        return f"cron:{self.name}:{slot.astimezone(UTC).isoformat()}"

    def _same(self, other: Schedule) -> bool:
        return (self.task.kind, self.spec, self.carry_text, self.priority) == (
            other.task.kind,
            other.spec,
            other.carry_text,
            other.priority,
        )


_SCHEDULES: dict[str, Schedule] = {}


def schedule(
    task: Task[Any],
    cron: str,
    carry: Any = _NO_CARRY,
    *,
    tz: str | None = None,
    name: str | None = None,
    priority: Priority | None = None,
) -> Schedule:
    """Declare a recurring schedule of ``task``: each slot of ``cron`` (read in ``tz``,
    default UTC) enqueues a job with ``carry`` (default: the carry type built with no
    arguments). ``name`` (default ``<kind>@<cron>``) identifies the schedule in the
    database; declaring a name again with another definition is a ``ConfigError``.
    """
    if not isinstance(task, Task):
        raise ConfigError(f"schedule: task must be declared with @venturi.task, got {task!r}")
    spec = CronSpec(cron, tz)
    if name is None:
        name = f"{task.kind}@{spec.expression}" + ("" if spec.tz == "UTC" else f"@{spec.tz}")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ConfigError(f"schedule name must be a non-empty string, got {name!r}")
    prio = None if priority is None else as_priority(priority)
    if carry is _NO_CARRY:
        carry = default_cron_carry(task.carry_type, task.kind)
    new = Schedule(name, task, spec, carry, prio)
    existing = _SCHEDULES.get(name)
    if existing is not None and not existing._same(new):
        raise ConfigError(
            f"schedule {name!r} is already declared as {existing!r}: pass another name="
        )
    _SCHEDULES[name] = new
    return new


def declared() -> dict[str, Schedule]:
    """A copy of the schedules declared with ``venturi.schedule``: name -> schedule."""
    return dict(_SCHEDULES)


def unschedule(name: str) -> None:
    """Forget a schedule declared with ``venturi.schedule`` (its database row stays)."""
    _SCHEDULES.pop(name, None)


def schedules_for(kinds: Iterable[str]) -> list[Schedule]:
    """The schedules of these kinds: each cron task's own (named after its kind) and the
    declared ones; ``ConfigError`` if two share a name."""
    wanted = set(kinds)
    tasks = registered()
    found: dict[str, Schedule] = {}
    candidates = [
        Schedule(kind, t, t.cron, t.cron_carry)
        for kind, t in sorted(tasks.items())
        if kind in wanted and t.cron is not None
    ]
    candidates += [s for s in _SCHEDULES.values() if s.task.kind in wanted]
    for s in candidates:
        if s.name in found:
            raise ConfigError(f"two schedules are named {s.name!r}: {found[s.name]!r} and {s!r}")
        found[s.name] = s
    return list(found.values())


class CronScheduler:
    """Maintenance task: enqueues the due slot of each schedule of the worker's kinds
    (or of ``schedules``, if given).

    Checks every ``interval`` seconds (default 1) but only reads the database when a slot
    may be due; slots are computed on the database's clock, so workers agree on them.
    Safe in many workers at once: a slot is enqueued by whichever worker advances the
    schedule's row, in the same transaction (a row lock serializes them).
    """

    name = "cron"

    def __init__(
        self,
        schedules: Iterable[Schedule] | None = None,
        *,
        interval: timedelta | float = DEFAULT_INTERVAL,
    ) -> None:
        self.interval = seconds(interval, "cron interval")
        self.schedules = None if schedules is None else list(schedules)
        if self.schedules is not None:
            for s in self.schedules:
                if not isinstance(s, Schedule):
                    raise ConfigError(f"cron: schedules must be venturi.Schedule, got {s!r}")
            names = [s.name for s in self.schedules]
            if len(set(names)) != len(names):
                raise ConfigError("cron: two schedules share a name")
        # Skip the database until the next slot is due: the wall-clock instant of the
        # next slot, measured on the database clock, and the set of schedules it was for.
        self._next_due: float = 0.0
        self._planned: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"<venturi.CronScheduler every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        active = self.schedules if self.schedules is not None else schedules_for(worker.kinds)
        if not active:
            return
        names = frozenset(s.name for s in active)
        if names == self._planned and time.time() < self._next_due:
            return
        by_name = {s.name: s for s in active}
        schema = worker.schema
        rows = await db.schedules.schedule_list(pool, schema=schema, names=sorted(by_name))
        db_now: datetime = rows[0]["now"]
        offset = db_now.timestamp() - time.time()
        for row in rows:
            s = by_name[row["name"]]
            slot = s.spec.latest(db_now)
            last: datetime | None = row["last_slot"]
            if last is None:
                await db.schedules.schedule_init(pool, schema=schema, name=s.name, slot=slot)
                log.info("schedule %s: first seen; its first slot is after %s", s.name, slot)
            elif slot > last:
                await self._enqueue(pool, worker, s, slot, last)
        self._planned = names
        # Measured on the database's clock: the local wall clock may be off.
        self._next_due = min(s.spec.next_after(db_now) for s in active).timestamp() - offset

    async def _enqueue(
        self, pool: Any, worker: Any, s: Schedule, slot: datetime, last: datetime
    ) -> None:
        schema = worker.schema
        async with pool.acquire() as conn, conn.transaction():
            if not await db.schedules.schedule_advance_if_behind(
                conn, schema=schema, name=s.name, slot=slot
            ):
                return  # another worker enqueued this slot
            job_id = await s.task.enqueue(
                conn, s.carry, at=slot, key=s.key(slot), priority=s.priority, schema=schema
            )
        worker.stats["cron_enqueued"] += 1
        if s.spec.next_after(last) < slot:
            worker.stats["cron_coalesced"] += 1
            log.info(
                "schedule %s: slots after %s were missed; one catch-up job %d for %s",
                s.name,
                last,
                job_id,
                slot,
            )
        else:
            log.debug("schedule %s: enqueued job %d for %s", s.name, job_id, slot)
