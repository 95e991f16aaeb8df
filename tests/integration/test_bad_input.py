"""Bad input: each answered with a clear error, and nothing lost.

The basics live beside the features they guard (test_enqueue: a carry of the wrong type,
a carry over a small limit; test_worker: knobs, an undecodable carry, a dict returned;
test_cli: an invalid schema name for ``schema render``, an unreachable DSN for ``schema
apply``; test_tasks: task arguments). This file fills the gaps: an unknown kind in the
table, carries that stopped decoding in other ways and what the journal says, the default
1 MiB carry limit on every path a carry is written, more things that are not outcomes,
and the ``venturi worker`` command's own bad input (an unapplied schema, an unreachable
database, bad knobs), which must be one line on stderr, exit code 2, no traceback.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import (
    FAST,
    assert_one_clean_error,
    events,
    running,
    venturi_cli_async,
    wait_for,
    wait_stat,
    wait_status,
)
from tests.support import Item as N
from venturi import Context, Priority, admin, db, sql
from venturi.runtime.worker import Worker
from venturi.tasks import DEFAULT_MAX_CARRY_BYTES


async def run_until(dsn: str, conn: Any, task: venturi.Task[Any], job_id: int, status: str) -> None:
    async def reached() -> bool:
        job = await venturi.get_job(conn, job_id)
        return job is not None and job.attempt >= 1 and job.status == status

    async with running(Worker(None, dsn, [task], poll_max=0.05)):
        await wait_for(reached)


# --- an unknown kind in the table -------------------------------------------------------


async def test_unknown_kind_is_never_claimed_and_is_listed(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="bi_retired", priority=Priority.HIGH)
    async def retired(ctx: Context[Any], carry: N) -> None:
        raise AssertionError("no worker knows this kind any more")

    @venturi.task(kind="bi_known", priority=Priority.LOW)
    async def known(ctx: Context[Any], carry: N) -> None:
        return None

    # The retired kind's job is first in claim order (HIGH, oldest) and stays so.
    orphan = await retired.enqueue(conn, N(0))
    venturi.tasks.unregister("bi_retired")
    ids = await venturi.enqueue_many(conn, [known.job(N(i)) for i in range(30)])
    worker = Worker(None, dsn, [known], poll_max=0.05, concurrency=2)
    async with running(worker):
        for job_id in ids:
            await wait_status(conn, job_id, "completed")
        # More claim rounds (and their recovery CTE) with only the orphan left.
        await wait_stat(worker, "empty_claims", worker.stats["empty_claims"] + 3)
    assert worker.stats["claimed"] == 30
    job = await venturi.get_job(conn, orphan)
    assert job is not None and (job.status, job.attempt, job.claimed_by) == ("pending", 0, None)
    # The manual sweep leaves it alone too; the operator finds it with `jobs list`.
    assert (await venturi_cli_async("recover", "--dsn", dsn)).returncode == 0
    listed = await venturi_cli_async("jobs", "list", "--dsn", dsn, "--kind", "bi_retired", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["kind"], r["status"]) for r in rows] == [(orphan, "bi_retired", "pending")]
    table = await venturi_cli_async("jobs", "list", "--dsn", dsn, "--status", "pending")
    assert table.returncode == 0 and "bi_retired" in table.stdout and "bi_known" not in table.stdout


# --- carries that no longer decode --------------------------------------------------------


class V1(msgspec.Struct):
    url: str


class V2(msgspec.Struct):
    url: str
    depth: int  # a new required field: V1 carries lack it


class V3(msgspec.Struct):
    url: list[str]  # a field whose type changed


@pytest.mark.parametrize(
    ("old_type", "old_carry", "new_type", "error"),
    [
        (V1, V1("https://a.test"), V2, "Object missing required field `depth`"),
        (V1, V1("https://a.test"), V3, "Expected `array`, got `str`"),
        (int, 7, V1, "Expected `object`, got `int`"),
        (V1, V1("x"), int, "Expected `int`, got `object`"),
    ],
)
async def test_undecodable_carry_is_dead_once_with_the_error_in_the_journal(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], old_type: Any, old_carry: Any,
    new_type: Any, error: str,
) -> None:  # fmt: skip
    async def old_fn(ctx: Context[Any], carry: Any) -> None:
        return None

    old_fn.__annotations__["carry"] = old_type  # the carry type of the first deployment
    old = venturi.task(kind="bi_evolve")(old_fn)
    job_id = await old.enqueue(conn, old_carry)
    venturi.tasks.unregister("bi_evolve")
    ran: list[Any] = []

    async def new_fn(ctx: Context[Any], carry: Any) -> None:
        ran.append(carry)

    new_fn.__annotations__["carry"] = new_type  # ... and of the next one
    new = venturi.task(kind="bi_evolve", max_failures=5, backoff=FAST)(new_fn)

    worker = Worker(None, dsn, [new], poll_max=0.05)
    async with running(worker):
        await wait_status(conn, job_id, "dead")
        # Claim rounds since, where a retry loop would have claimed it again.
        await wait_stat(worker, "empty_claims", worker.stats["empty_claims"] + 3)
    assert ran == []
    job = await venturi.get_job(conn, job_id)
    assert job is not None and (job.attempt, job.failures) == (1, 0)
    assert job.carry == msgspec.to_builtins(old_carry)  # the stored carry is kept as it was
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "dead"]
    detail = journal[-1].detail or ""
    assert "carry no longer decodes" in detail and error in detail, detail
    assert detail == job.last_error


# --- oversized carries: 1 MiB by default, on every path a carry is written ---------------


def _string_of_encoded_size(size: int) -> str:
    return "x" * (size - 2)  # JSON adds the two quotes


async def test_default_carry_limit_is_one_mib(conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="bi_big")
    async def handler(ctx: Context[Any], carry: str) -> None:
        return None

    assert DEFAULT_MAX_CARRY_BYTES == 1 << 20
    at_limit = await handler.enqueue(conn, _string_of_encoded_size(1 << 20))
    job = await venturi.get_job(conn, at_limit)
    assert job is not None and len(job.carry) == (1 << 20) - 2
    with pytest.raises(ValueError, match=r"1048577 bytes encoded, over the limit of 1048576"):
        await handler.enqueue(conn, _string_of_encoded_size((1 << 20) + 1))
    with pytest.raises(ValueError, match="max_carry_bytes"):
        await venturi.enqueue_many(
            conn, [handler.job("small"), handler.job(_string_of_encoded_size(2 << 20))]
        )
    rows = await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA)
    assert sum(r["jobs"] for r in rows) == 1  # only the one at the limit


@pytest.mark.parametrize("how", ["pause", "retry"])
async def test_oversized_carry_from_a_handler_is_a_failed_execution(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], how: str
) -> None:
    @venturi.task(kind="bi_grow", max_carry_bytes=1000, max_failures=1, backoff=FAST)
    async def handler(ctx: Context[Any], carry: str) -> venturi.Outcome:
        bigger = carry * 100
        return venturi.pause(bigger) if how == "pause" else venturi.retry(bigger)

    job_id = await handler.enqueue(conn, "0123456789")
    await run_until(dsn, conn, handler, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.carry == "0123456789"  # the oversized one was not stored
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "failed", "dead"]
    detail = journal[2].detail or ""
    assert "cannot be stored" in detail and "over the limit of 1000 (max_carry_bytes)" in detail


# --- handlers that return something that is not an outcome ---------------------------------


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: venturi.complete, "handler returned function"),  # forgot to call it
        (lambda: 42, "handler returned int 42, not an outcome"),
        (lambda: "done", "handler returned str 'done', not an outcome"),
        (lambda: [venturi.complete()], "handler returned list"),
        (lambda: venturi.Outcome, "not an outcome"),
        (lambda: "x" * 10_000, "handler returned str 'xxxx"),  # a huge one is cut short
        (lambda: venturi.complete(Opaque()), "result is not msgspec-encodable"),
        (lambda: venturi.pause({"n": "not an int"}), "cannot be stored: carry of task"),
    ],
)
@pytest.mark.parametrize("sync", [False, True])
async def test_not_an_outcome_is_a_failed_execution_saying_what_came_back(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], make: Any, said: str, sync: bool
) -> None:
    if sync:

        @venturi.task(kind="bi_return", max_failures=1)
        def handler(ctx: Context[Any], carry: N) -> Any:
            return make()

    else:

        @venturi.task(kind="bi_return", max_failures=1)
        async def handler(ctx: Context[Any], carry: N) -> Any:
            return make()

    job_id = await handler.enqueue(conn, N(1))
    await run_until(dsn, conn, handler, job_id, "dead")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and said in (job.last_error or ""), job and job.last_error
    assert len(job.last_error or "") < 2000
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == ["enqueued", "claimed", "failed", "dead"]


# --- the commands and a schema name they refuse ----------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["schema", "apply", "--schema", "Jobs"],
        ["recover", "--schema", "a-b"],
        ["jobs", "list", "--schema", 'x"; DROP SCHEMA venturi; --'],
        ["stats", "--schema", "x" * 56],
    ],
)
async def test_invalid_schema_name_refused_by_every_command(dsn: str, args: list[str]) -> None:
    out = await venturi_cli_async(*args, "--dsn", dsn)
    assert_one_clean_error(out, "schema must be a lower-case SQL identifier")
    conn = await asyncpg.connect(dsn)
    try:  # and nothing was rendered into the database
        assert await db.schema.schema_version(conn, schema="venturi") >= 1
    finally:
        await conn.close()


# --- text PostgreSQL cannot store: the NUL character ---------------------------------------


async def test_nul_in_a_carry_is_refused_before_writing(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="bi_nul")
    async def handler(ctx: Context[Any], carry: str) -> None:
        return None

    async with conn.transaction():
        with pytest.raises(ValueError, match="carry of task 'bi_nul'"):
            await handler.enqueue(conn, "a\x00b")
        # The caller's transaction is still usable: the refusal came before any write.
        await handler.enqueue(conn, "ab")
    rows = await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA)
    assert sum(r["jobs"] for r in rows) == 1


@pytest.mark.parametrize("how", ["result", "raise", "dead", "retry"])
async def test_nul_in_an_outcome_does_not_wedge_the_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], how: str
) -> None:
    @venturi.task(kind="bi_nul_out", max_failures=1, backoff=FAST)
    async def handler(ctx: Context[Any], carry: N) -> venturi.Outcome:
        if carry.n == 0:
            if how == "raise":
                raise ValueError("bad\x00byte")
            outcomes: dict[str, venturi.Outcome] = {
                "result": venturi.complete("a\x00b"),
                "dead": venturi.dead("why\x00"),
                "retry": venturi.retry(reason="again\x00"),
            }
            return outcomes[how]
        return venturi.complete()

    poison, *rest = await venturi.enqueue_many(conn, [handler.job(N(i)) for i in range(12)])

    async def settled() -> bool:
        jobs = [await venturi.get_job(conn, i) for i in [poison, *rest]]
        return all(j is not None and j.status in ("completed", "dead") for j in jobs)

    async with running(Worker(None, dsn, [handler], poll_max=0.05, concurrency=4)):
        await wait_for(settled, within=6)
    job = await venturi.get_job(conn, poison)
    assert job is not None and job.status in ("completed", "dead")


@pytest.mark.parametrize("bad", ["", " k", "k ", "a,b", "x" * 201, "a\x00b", 3])
async def test_a_kind_no_task_can_have_is_written_nowhere(
    conn: asyncpg.Connection, kinds: list[str], bad: Any
) -> None:
    # One rule wherever a kind is written. set_group took "a\x00b" as far as the
    # database (its error, not venturi's), and "a,b", " k" or a kind of 201 characters
    # as a group's settings or a pause of a kind no job can have.
    async def h(ctx: Context[Any], carry: N) -> None:
        return None

    with pytest.raises(venturi.ConfigError, match="kind must"):
        venturi.task(kind=bad)(h)
    with pytest.raises(venturi.ConfigError, match="kind must"):
        await venturi.set_group(conn, bad, "g", cap=1)
    with pytest.raises(venturi.ConfigError, match="kind must"):
        await admin.pause_kinds(conn, [bad])
    with pytest.raises(venturi.ConfigError, match="kind must"):
        await admin.resume_kinds(conn, [bad])
    assert await conn.fetchval("SELECT count(*) FROM venturi.groups") == 0
    assert await db.kinds.kind_paused_list(conn, schema="venturi") == []


async def test_carry_typed_any_is_either_refused_or_works(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    try:

        @venturi.task(kind="bi_any")
        async def handler(ctx: Context[Any], carry: Any) -> None:
            return None

    except venturi.ConfigError as exc:
        # Refused at declaration: fine too, with one line that names the problem.
        assert "carry" in str(exc) and "Any" in str(exc) and "\n" not in str(exc)
        return
    job_id = await handler.enqueue(conn, {"a": [1, "two"]})
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.carry == {"a": [1, "two"]}
