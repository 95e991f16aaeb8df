"""Recurring schedules, as an application declares them: a task, a cron expression read
in a time zone, and the carry its jobs get.

Declare one with ``@venturi.task(..., cron="*/5 * * * *", tz="Europe/Paris")`` (its name
is the kind) or ``venturi.schedule(task, cron, carry)``. The declarations live here, below
both of their readers: ``venturi.maintenance.cron.CronScheduler`` (the worker's task that
enqueues each slot) and ``venturi.admin.schedules`` (an operator's list of schedules).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from venturi import validate
from venturi.cronspec import CronSpec
from venturi.errors import ConfigError
from venturi.handler_types import default_cron_carry
from venturi.priority import Priority
from venturi.tasks import Task, as_priority, registered

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
        if not validate.storable(name):
            # The name is in the schedule's row and its jobs' keys: the database refused
            # it in every cron pass, and the pass's other schedules with it.
            raise ConfigError(
                "schedule name must be a string without NUL characters or lone surrogates, "
                f"got {validate.shown(name)}"
            )
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

    def same(self, other: Schedule) -> bool:
        """True when ``other`` declares the same job (kind, slots, carry, priority)."""
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
        raise ConfigError(f"schedule name must be a non-empty string, got {validate.shown(name)}")
    prio = None if priority is None else as_priority(priority)
    if carry is _NO_CARRY:
        carry = default_cron_carry(task.carry_type, task.kind)
    new = Schedule(name, task, spec, carry, prio)
    owner = registered().get(name)
    if owner is not None and owner.cron is not None:
        raise ConfigError(
            f"schedule {name!r}: {name!r} is the name of task {name!r}'s own cron= "
            "schedule: pass another name="
        )
    existing = _SCHEDULES.get(name)
    if existing is not None and not existing.same(new):
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
    found, clashes = assemble(kinds)
    if clashes:
        raise ConfigError(clashes[0])
    return found


def assemble(kinds: Iterable[str]) -> tuple[list[Schedule], list[str]]:
    """The schedules of these kinds, but those whose name another one has too; and a
    one-line message for each such name. (A task declared after a ``venturi.schedule``
    of its kind's name is seen here only: a declaration cannot see a later one.)"""
    wanted = set(kinds)
    tasks = registered()
    found: dict[str, Schedule] = {}
    candidates = [
        Schedule(kind, t, t.cron, t.cron_carry)
        for kind, t in sorted(tasks.items())
        if kind in wanted and t.cron is not None
    ]
    candidates += [s for s in _SCHEDULES.values() if s.task.kind in wanted]
    clashes: dict[str, str] = {}
    for s in candidates:
        if s.name in found and s.name not in clashes:
            clashes[s.name] = (
                f"two schedules are named {s.name!r}: {found[s.name]!r} and {s!r}; "
                "give the venturi.schedule another name="
            )
        found.setdefault(s.name, s)
    return [s for n, s in found.items() if n not in clashes], list(clashes.values())
