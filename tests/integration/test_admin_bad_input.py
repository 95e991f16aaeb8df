"""venturi.admin refuses a bad argument with ConfigError before any statement, instead of
handing it to the driver (whose own error, or a wrong answer, came back): real
PostgreSQL, a fresh database per test."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from venturi import JobSpec, admin, enqueue_many
from venturi.errors import ConfigError, SchemaError

Call = Callable[[asyncpg.Connection], Awaitable[Any]]

NAN, INF = math.nan, math.inf

REFUSED: dict[str, tuple[Call, str]] = {
    # 1.5 was read as job 1, 2.9 as job 3 (the driver rounds): a wrong job shown.
    "show_job 1.5": (lambda c: admin.show_job(c, 1.5), "job ids must be positive integers"),  # type: ignore[arg-type]
    "show_job '1'": (lambda c: admin.show_job(c, "1"), "job ids must be positive integers"),  # type: ignore[arg-type]
    "show_job 2**63": (lambda c: admin.show_job(c, 2**63), "job ids must be at most"),
    "send_signal 2**63": (
        lambda c: admin.send_signal(c, 2**63, "go", None),
        "job ids must be at most 9,223,372,036,854,775,807",
    ),
    "purge_count nan": (
        lambda c: admin.purge_count(c, status="completed", older_than=NAN),
        "older_than must be finite",
    ),
    "purge inf": (
        lambda c: admin.purge(c, status="completed", older_than=INF),
        "older_than must be finite",
    ),
    "purge 1e300": (
        lambda c: admin.purge(c, status="completed", older_than=1e300),
        "older_than must be at most 100 years",
    ),
    "purge -1": (
        lambda c: admin.purge(c, status="completed", older_than=-1),
        "older_than must be non-negative",
    ),
    "purge_count kind NUL": (
        lambda c: admin.purge_count(c, status="completed", older_than=0, kind="a\x00b"),
        "kind must not hold a NUL character",
    ),
    "list_jobs kind NUL": (
        lambda c: admin.list_jobs(c, kind="a\x00b"),
        "kind must not hold a NUL character",
    ),
    "list_jobs kind surrogate": (
        lambda c: admin.list_jobs(c, kind="a\ud800"),
        "kind must be valid Unicode text",
    ),
    "top_frame inf": (
        lambda c: admin.top_frame(c, completed_window=INF),
        "completed_window must be finite",
    ),
    "top_frame -5": (
        lambda c: admin.top_frame(c, completed_window=-5),
        "completed_window must be positive",
    ),
    "stats failures nan": (
        lambda c: admin.stats(c, failures_window=NAN),
        "failures_window must be finite",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
async def test_a_bad_argument_is_a_config_error_before_any_statement(
    conn: asyncpg.Connection, name: str
) -> None:
    call, said = REFUSED[name]
    await enqueue_many(conn, [JobSpec("mail", "{}", 1, None, None, None, 25)])
    with pytest.raises(ConfigError, match=said):
        await call(conn)
    # Nothing was written, and the connection is as good as before (no statement failed).
    assert await conn.fetchval("select count(*) from venturi.jobs") == 1
    assert not conn.is_in_transaction()


async def test_a_whole_job_id_still_shows_its_job(conn: asyncpg.Connection) -> None:
    [job] = await enqueue_many(conn, [JobSpec("mail", "{}", 1, None, None, None, 25)])
    detail = await admin.show_job(conn, job)
    assert detail is not None and detail.job.id == job
    assert [r.id for r in await admin.list_jobs(conn, kind="mail")] == [job]


async def test_list_jobs_on_a_schema_not_applied_says_what_to_run(
    conn: asyncpg.Connection,
) -> None:
    # It was the driver's UndefinedTableError, "relation nosuch.all_jobs does not exist".
    with pytest.raises(SchemaError, match="run `venturi schema apply --schema nosuch"):
        await admin.list_jobs(conn, schema="nosuch")
