"""A connection that runs no SQL, for unit tests of the worker's decisions: it names each
statement it is asked to run (by its template) with its parameters, and answers with
rows a test gives per statement."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from venturi import sql
from venturi.runtime.run import Run
from venturi.tasks import Task

Answer = Callable[[tuple[Any, ...]], list[dict[str, Any]]]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# The same instant as the claim returns it (venturi.runtime.run.Run.created_us).
T0_US = int(T0.timestamp()) * 1_000_000


@functools.cache
def _names(schema: str) -> dict[str, str]:
    return {sql.statement(name, schema): name for name in sql.statement_names()}


# Statements a test's fake connection answers without listing them in its calls: whether
# the code under test sends them depends on the machine's speed (see FakeConn).
SILENT = frozenset({"job_statistics_state", "group_kinds", "group_shares", "group_refill_advance"})


class FakeConn:
    """``calls`` lists ``(statement, parameters)`` in order; ``answers`` maps a
    statement's name to the rows it returns (default: none)."""

    def __init__(self, schema: str = sql.DEFAULT_SCHEMA, **answers: Answer) -> None:
        self.schema = schema
        # A claim that fills its batch and takes more than 5 ms makes the loop look at
        # the table's statistics (venturi.runtime.statistics). A fake claim is that slow
        # only on a busy machine (its statement's first rendering is timed with it), and
        # the tests then failed by the machine's load: on the look's unanswered row, or
        # on a list of calls with the look in it. So the look is answered "fresh" unless
        # a test says otherwise, and is left out of ``calls`` (SILENT).
        # A busy loop asks which of its kinds have groups at most once a second
        # (Claimer.look_for_groups): answered "none", and left out of ``calls`` too.
        fresh: dict[str, Answer] = {
            "job_statistics_state": lambda args: [{"stale": False, "allowed": True}],
            "group_kinds": lambda args: [{"kinds": []}],
            "group_shares": lambda args: [],
        }
        self.answers = fresh | answers
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def named(self, statement: str) -> list[tuple[Any, ...]]:
        """The parameters of each call of ``statement``."""
        return [args for name, args in self.calls if name == statement]

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        name = _names(self.schema)[query]
        if name not in SILENT:
            self.calls.append((name, args))
        answer = self.answers.get(name)
        return [] if answer is None else answer(args)

    async def fetchrow(self, query: str, *args: Any) -> dict[str, Any] | None:
        rows = await self.fetch(query, *args)
        return rows[0] if rows else None

    async def fetchval(self, query: str, *args: Any) -> Any:
        row = await self.fetchrow(query, *args)
        return None if row is None else next(iter(row.values()))

    async def execute(self, query: str, *args: Any) -> str:
        await self.fetch(query, *args)
        return ""


def job_row(job_id: int, kind: str, **fields: Any) -> dict[str, Any]:
    """A claimed job as ``job_claim`` returns it."""
    row = {
        "id": job_id,
        "kind": kind,
        "attempt": 1,
        "failures": 0,
        "carry": '{"n": 1}',
        "priority": 1,
        "created_us": T0_US,
        "traceparent": None,
        "grp": None,
        "lost": False,
    }
    return row | fields


def run_of(task: Task[Any], job_id: int = 1, **fields: Any) -> Run:
    """A claimed run of ``task``, as the in-flight set makes one."""
    values: dict[str, Any] = {
        "id": job_id,
        "attempt": 1,
        "failures": 0,
        "carry_text": '{"n": 1}',
        "priority": 1,
        "created_us": T0_US,
    }
    return Run(task=task, **(values | fields))
