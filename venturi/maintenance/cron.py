"""Recurring jobs: the maintenance task that enqueues the slots of schedules.

Schedules are declared in ``venturi.schedules`` (``@venturi.task(..., cron=...)`` or
``venturi.schedule(task, cron, carry)``; their names are importable from here too); a
worker with ``maintenance=[venturi.CronScheduler()]`` enqueues the schedules of its kinds.

Each slot is enqueued exactly once however many workers tick: the worker that moves the
schedule's row in ``<schema>.schedules`` to the slot enqueues the slot's job in the same
transaction, and the others find the row already there. After downtime, the missed slots
are coalesced into one catch-up job for the latest of them; a short gap (its first slot
at most ``EACH_SLOT_WITHIN`` old: the check itself was late) enqueues each of its slots.
A schedule seen for the first time starts with its next slot, and so does one whose
definition changed; during a rolling deploy, the definition written last (the newer
deploy's) runs the schedule, and workers started before it was written defer to it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from venturi import db
from venturi.cronspec import CronSpec
from venturi.db import errors as db_errors
from venturi.errors import ConfigError
from venturi.schedules import (
    Schedule,
    assemble,
    declared,
    schedule,
    schedules_for,
    unschedule,
)
from venturi.traceparent import current_traceparent
from venturi.validate import seconds

# The declarations moved to venturi.schedules (below the operator's API, which lists
# them); importable from here as before.
__all__ = [
    "DEFAULT_INTERVAL",
    "CronScheduler",
    "Schedule",
    "declared",
    "schedule",
    "schedules_for",
    "unschedule",
]

log = logging.getLogger("venturi.cron")

DEFAULT_INTERVAL = 1.0

# A gap whose first missed slot is at most this old is the check's own lateness (a busy
# worker), not downtime: each slot in it is enqueued (61 at most, for a seconds field).
EACH_SLOT_WITHIN = timedelta(minutes=1)


class CronScheduler:
    """Maintenance task: enqueues the due slot of each schedule of the worker's kinds
    (or of ``schedules``, if given).

    Checks every ``interval`` seconds (default 1) but only reads the database when a slot
    may be due; slots are computed on the database's clock, so workers agree on them.
    Safe in many workers at once: a slot is enqueued by whichever worker advances the
    schedule's row, in the same transaction (a row lock serializes them).
    """

    name = "cron"
    # On an asyncio task of its own in the worker: a slow pass of another maintenance
    # task (an alert hook, a big table's history) must not make its slots late.
    own_task = True

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
                    raise ConfigError(
                        f"cron: schedules must be made by venturi.schedule(...), got {s!r}"
                    )
            names = [s.name for s in self.schedules]
            if len(set(names)) != len(names):
                raise ConfigError("cron: two schedules share a name")
        # Skip the database until the next slot is due: the wall-clock instant of the
        # next slot, measured on the database clock, and the set of schedules it was for.
        self._next_due: float = 0.0
        self._planned: frozenset[str] = frozenset()
        # Name clashes already logged: each is said once, not at every check.
        self._said: set[str] = set()
        # When this scheduler started, by the database's clock (its first check): a
        # definition written after it is a newer deploy's, which this one defers to.
        self._started: datetime | None = None
        # The schedules a newer deploy's definition runs (said once, checked each pass).
        self._deferring: set[str] = set()

    def __repr__(self) -> str:
        return f"<venturi.CronScheduler every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        active = self.schedules if self.schedules is not None else self._assemble(worker)
        if not active:
            return
        names = frozenset(s.name for s in active)
        if names == self._planned and time.time() < self._next_due:
            return
        by_name = {s.name: s for s in active}
        schema = worker.schema
        names_in_order = sorted(by_name)
        rows = await db.schedules.schedule_list(
            pool,
            schema=schema,
            names=names_in_order,
            kinds=[by_name[n].task.kind for n in names_in_order],
        )
        db_now: datetime = rows[0]["now"]
        if self._started is None:
            self._started = db_now
        offset = db_now.timestamp() - time.time()
        failed = False
        for row in rows:
            s = by_name[row["name"]]
            try:
                await self._due(pool, worker, s, row, db_now)
            except Exception as exc:  # this schedule only: the others still run
                failed = True
                worker.stats["cron_failed"] += 1
                log.warning(
                    "schedule %r failed (retrying in %gs): %s: %s",
                    s.name,
                    self.interval,
                    type(exc).__name__,
                    db_errors.one_line(exc),
                    exc_info=not isinstance(exc, db_errors.RETRYABLE),
                )
        # A failed schedule is retried at the next interval, not at the next slot; so is a
        # paused kind's, whose slots are caught up at the first check after the resume,
        # and one a newer deploy runs (a rollback's workers, started later, win in turn).
        self._deferring &= names
        waiting = any(r["paused"] for r in rows) or bool(self._deferring)
        self._planned = frozenset() if failed or waiting else names
        # Measured on the database's clock: the local wall clock may be off.
        self._next_due = min(s.spec.next_after(db_now) for s in active).timestamp() - offset

    def _assemble(self, worker: Any) -> list[Schedule]:
        """The worker's schedules; two of one name are both left out, and said once."""
        active, clashes = assemble(worker.kinds)
        for said in clashes:
            if said not in self._said:
                self._said.add(said)
                log.error("cron: %s (neither runs)", said)
        return active

    async def _due(self, pool: Any, worker: Any, s: Schedule, row: Any, db_now: datetime) -> None:
        """Enqueue the due slot of ``s`` (``row``: its row as ``schedule_list`` read it)."""
        slot = s.spec.latest(db_now)
        last: datetime | None = row["last_slot"]
        spec = s.spec
        if last is None:
            await db.schedules.schedule_init(
                pool,
                schema=worker.schema,
                name=s.name,
                slot=slot,
                expression=spec.expression,
                tz=spec.tz,
            )
            log.info("schedule %s: first seen; its first slot is after %s", s.name, slot)
            return
        if (row["expression"], row["tz"]) != (spec.expression, spec.tz):
            if not await self._redefine(pool, worker, s, row, slot, db_now):
                return
        self._deferring.discard(s.name)
        if slot > last and row["paused"]:
            # Its slots wait in the row, not as one pending job each: at the resume they
            # are caught up as after downtime (each of a short pause, one of a long one).
            log.debug(
                "schedule %s: kind %s is paused; slots after %s wait", s.name, s.task.kind, last
            )
        elif slot > last:
            await self._enqueue(pool, worker, s, slot, db_now)

    async def _redefine(
        self, pool: Any, worker: Any, s: Schedule, row: Any, slot: datetime, db_now: datetime
    ) -> bool:
        """Give the row of ``s`` its definition, unless one written after this scheduler
        started (a newer deploy's) runs it. True when the row took it on with its latest
        slot kept (an older version's row, without one): the check goes on."""
        assert self._started is not None
        spec = s.spec
        started, taking_over = self._started, False
        if row["expression"] is not None and (row["defined_at"] or started) > started:
            if not _abandoned(row, db_now):
                if s.name not in self._deferring:
                    self._deferring.add(s.name)
                    log.info(
                        "schedule %s: a newer definition, %r (%s), written at %s after this "
                        "worker started, runs it; this worker's %r (%s) defers to it",
                        s.name,
                        row["expression"],
                        row["tz"],
                        row["defined_at"],
                        spec.expression,
                        spec.tz,
                    )
                return False
            # Unless it is written again meanwhile (its workers were only late).
            started, taking_over = row["defined_at"], True
        before = await db.schedules.schedule_redefine(
            pool,
            schema=worker.schema,
            name=s.name,
            slot=slot,
            expression=spec.expression,
            tz=spec.tz,
            started=started,
        )
        self._deferring.discard(s.name)
        if before is None:
            return False  # another worker redefined it: the next check goes on from there
        if before["expression"] is None:
            return True
        log.log(
            logging.WARNING if taking_over else logging.INFO,
            "schedule %s: its cron changed from %r (%s) to %r (%s)%s; it starts over, its "
            "first slot after %s",
            s.name,
            before["expression"],
            before["tz"],
            spec.expression,
            spec.tz,
            f" (no worker ran {before['expression']!r} since {row['last_slot']}: this one "
            "takes over)"
            if taking_over
            else "",
            slot,
        )
        return False

    async def _enqueue(
        self, pool: Any, worker: Any, s: Schedule, slot: datetime, db_now: datetime
    ) -> None:
        schema = worker.schema
        async with db.connect.pooled(pool) as conn:
            async with conn.transaction():
                previous = await db.schedules.schedule_advance_if_behind(
                    conn, schema=schema, name=s.name, slot=slot
                )
                if previous is None:
                    return  # another worker enqueued this slot
                # Against the slot the row had under its lock, not the one read before
                # it: another worker may have enqueued the slots in between meanwhile.
                slots = missed_slots(s, previous, slot, db_now)
                # One statement for them all (61 at most), as one enqueue each would.
                job_ids = await db.enqueue.job_insert_many(
                    conn,
                    schema=schema,
                    specs=[
                        s.task.job(s.carry, at=t, key=s.key(t), priority=s.priority) for t in slots
                    ],
                    on_conflict="existing",
                    traceparent=current_traceparent(),
                )
            # Counted once committed, before the connection goes back to the pool: a
            # shutdown cancels this pass, and a cancel during the pool's reset of the
            # connection would lose the count of a job already enqueued (and perhaps
            # already run by another worker).
            worker.stats["cron_enqueued"] += len(job_ids)
            if slots[0] != s.spec.next_after(previous):
                worker.stats["cron_coalesced"] += 1
                log.info(
                    "schedule %s: slots after %s were missed; one catch-up job %d for %s",
                    s.name,
                    previous,
                    job_ids[0],
                    slot,
                )
            elif len(slots) > 1:
                log.info(
                    "schedule %s: the check was late; jobs %s for the %d slots after %s",
                    s.name,
                    ", ".join(map(str, job_ids)),
                    len(slots),
                    previous,
                )
            else:
                log.debug("schedule %s: enqueued job %d for %s", s.name, job_ids[0], slot)


def _abandoned(row: Any, now: datetime) -> bool:
    """Whether no worker runs the definition in ``row``: its first slot after the row's
    is more than ``EACH_SLOT_WITHIN`` old (as downtime is), its kind not paused. A newer
    deploy's whose workers are gone (an old worker restarted during the deploy, then
    left): the workers that deferred to it take the schedule over."""
    if row["paused"]:
        return False  # its slots wait in the row for the resume
    spec = _parsed(row["expression"], row["tz"])
    if spec is None:
        return False  # a version newer than this one reads it: it is not this one's to judge
    return now - spec.next_after(row["last_slot"]) > EACH_SLOT_WITHIN


@functools.lru_cache(maxsize=64)
def _parsed(expression: str, tz: str) -> CronSpec | None:
    """A row's definition parsed once, not on each check of a worker that defers to it
    (every second), or None when this version cannot read it."""
    try:
        return CronSpec(expression, tz)
    except ConfigError:
        return None


def missed_slots(s: Schedule, previous: datetime, slot: datetime, now: datetime) -> list[datetime]:
    """The slots of ``s`` to enqueue now, after ``previous`` up to ``slot`` (the latest):
    each of them when the first is at most ``EACH_SLOT_WITHIN`` old (the check was late:
    a busy worker), else ``slot`` alone, the one catch-up job for them all (downtime)."""
    first = s.spec.next_after(previous)
    if now - first > EACH_SLOT_WITHIN:
        return [slot]
    slots = [first]
    while slots[-1] < slot:
        slots.append(s.spec.next_after(slots[-1]))
    return slots
