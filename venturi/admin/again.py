"""An operator's call asked again: rows that changed between a statement's snapshot and
its update (neither done nor refused), each asked once more, at most three times
(``asking_again``); and a bulk statement rolled back for a deadlock or a serialization
failure, run again (``again_on_rollback``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from venturi.admin.common import Change
from venturi.db import errors

T = TypeVar("T")

log = logging.getLogger("venturi.admin")

# A deadlock (a worker's batched settlement locking the same rows in another order) and
# a serialization failure: the statement was rolled back whole, and running it again is
# the same request.
ROLLED_BACK = frozenset({"40P01", "40001"})
# Tries in all, and the first pause between them (doubled each time, half-jittered).
ROLLBACK_TRIES = 4
ROLLBACK_PAUSE = 0.05

# Internal to venturi.admin: nothing exported.
__all__: list[str] = []


async def asking_again(
    conn: Any,
    ids: list[int],
    read: Callable[[list[int]], Awaitable[list[Any]]],
    verdict: Callable[[Any], Change | None],
    doing: str,
) -> list[Change]:
    """Run ``read`` on ``ids`` and turn each row into a ``Change``; a row ``verdict``
    answers None for (the job changed between the statement's snapshot and its update,
    so it was neither done nor refused) is asked again, at most three times in all. Each
    ``read`` rolled back for a deadlock is run again (``again_on_rollback`` on ``conn``)."""
    results: dict[int, Change] = {}
    todo = ids
    for _ in range(3):
        again = []
        for r in await again_on_rollback(conn, functools.partial(read, todo), doing):
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


def _in_callers_transaction(conn: Any) -> bool:
    """Whether ``conn`` is a connection inside a transaction its caller opened (a pool is
    not: each statement takes a connection of its own)."""
    inside = getattr(conn, "is_in_transaction", None)
    return bool(inside()) if callable(inside) else False


async def again_on_rollback(conn: Any, run: Callable[[], Awaitable[T]], doing: str) -> T:
    """``run()`` (one statement of an operator's bulk call on ``conn``), run again when
    the server rolled it back for a deadlock or a serialization failure, up to
    ``ROLLBACK_TRIES`` in all with a short pause between: alone in its transaction, the
    statement changed nothing and the operator is owed its results, not the raw error.
    Inside the caller's own transaction the whole transaction is rolled back: raised, for
    the caller to retry."""
    for n in range(1, ROLLBACK_TRIES + 1):
        try:
            return await run()
        except asyncpg.exceptions.TransactionRollbackError as exc:
            state = errors.sqlstate(exc, context=False)
            if state not in ROLLED_BACK or n == ROLLBACK_TRIES or _in_callers_transaction(conn):
                raise
            pause = ROLLBACK_PAUSE * 2 ** (n - 1) * (0.5 + random.random() / 2)
            log.info(
                "%s: %s (try %d of %d); trying again in %.0f ms",
                doing,
                errors.one_line(exc),
                n,
                ROLLBACK_TRIES,
                pause * 1000,
            )
            await asyncio.sleep(pause)
    raise AssertionError("unreachable")  # the last try returned or raised
