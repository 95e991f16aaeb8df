"""Kinds nobody runs: the opt-in warning of a worker that sees due jobs of a kind which
no live worker registers (a deploy that dropped a task, a typo in a kind).

Off by default: a worker may legitimately serve a subset of the kinds, and the kinds it
does not run are another worker's business; this warns only when no live worker at all
registers the kind, once per kind until some worker does again.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from venturi import db, validate
from venturi.status import DEFAULT_LIVENESS

log = logging.getLogger("venturi.worker")

DEFAULT_INTERVAL = 60.0


class UnservedKinds:
    """Maintenance task: every ``interval``, log a warning for each kind with due jobs
    that no live worker registers and no operator paused (``venturi worker
    --warn-unserved``)."""

    name = "unserved_kinds"

    def __init__(
        self,
        *,
        interval: timedelta | float = DEFAULT_INTERVAL,
        liveness: timedelta | float = DEFAULT_LIVENESS,
    ) -> None:
        self.interval = validate.seconds(interval, "unserved_kinds interval")
        self.liveness = validate.seconds(liveness, "unserved_kinds liveness")
        self.warned: set[str] = set()

    def __repr__(self) -> str:
        return f"<venturi.UnservedKinds every {self.interval:g}s>"

    async def run(self, pool: Any, worker: Any) -> None:
        rows = await db.workers.kind_list_unserved(
            pool, schema=worker.schema, liveness=self.liveness
        )
        now = {str(r["kind"]) for r in rows}
        for r in rows:
            if r["kind"] in self.warned:
                continue
            log.warning(
                "kind %s has %d due job(s), the oldest waiting %.0fs, and no live worker "
                "registers it: they will not run until one does",
                r["kind"],
                r["due"],
                r["oldest_due_seconds"] or 0.0,
                extra={"kind": r["kind"]},
            )
        # A kind that is served again (or has no due job) may warn again later.
        self.warned = now
