"""``ctx.sleep`` and ``ctx.sleep_until``: durable timers. The first run records the wake
time (the database's clock decides); until it is due the job waits, holding no slot,
and a worker of its kind wakes it then (``job_wake_due``); later runs return at once."""

from __future__ import annotations

from datetime import datetime, timedelta

from venturi import validate
from venturi.errors import ConfigError
from venturi.workflow.run import WorkflowRun
from venturi.workflow.suspend import Suspend


async def sleep_until(
    run: WorkflowRun, name: str, at: datetime | None, duration: timedelta | float | None = None
) -> None:
    """Wait until ``at`` (or ``duration`` after the first run reached this), recorded
    under ``name``."""
    name = run.records.claim(name, "ctx.sleep")
    recorded = (await run.load()).get(name)
    if recorded is None:
        if at is None:
            assert duration is not None
            at = run.records.after(duration)
        elif not isinstance(at, datetime) or at.tzinfo is None:
            raise ConfigError(
                f"ctx.sleep_until: at must be a timezone-aware datetime, got {validate.shown(at)}"
            )
        recorded = await run.record(name, "null", wake_at=at)
    wake_at = recorded.wake_at
    if wake_at is None or wake_at <= run.records.now():
        return
    raise Suspend(
        f"timer {name!r} until {wake_at.isoformat()}", run.records.wake_seq, wake_at=wake_at
    )
