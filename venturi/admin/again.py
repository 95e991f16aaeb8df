"""An operator's call asked again: rows that changed between a statement's snapshot and
its update (neither done nor refused), each asked once more, at most three times."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from venturi.admin.common import Change

# Internal to venturi.admin: nothing exported.
__all__: list[str] = []


async def asking_again(
    ids: list[int],
    read: Callable[[list[int]], Awaitable[list[Any]]],
    verdict: Callable[[Any], Change | None],
    doing: str,
) -> list[Change]:
    """Run ``read`` on ``ids`` and turn each row into a ``Change``; a row ``verdict``
    answers None for (the job changed between the statement's snapshot and its update,
    so it was neither done nor refused) is asked again, at most three times in all."""
    results: dict[int, Change] = {}
    todo = ids
    for _ in range(3):
        again = []
        for r in await read(todo):
            change = verdict(r)
            if change is None:
                again.append(r["id"])
            else:
                results[r["id"]] = change
        if not again:
            break
        todo = again
    for job_id in todo:
        results.setdefault(
            job_id, Change(job_id, False, f"job {job_id} kept changing while {doing} it")
        )
    return [results[i] for i in sorted(results)]
