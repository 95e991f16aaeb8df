"""Completion inside the handler's transaction: ``ctx.transaction()`` and
``ctx.complete(conn)`` commit or roll back with the handler's own writes, guarded by
the run's claim."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import asyncpg
import pytest

import venturi
import venturi.testing
from tests.support import Item, events, running, wait_status, wait_until
from venturi import Backoff, Context
from venturi.runtime.worker import Worker


@pytest.fixture
async def effects(conn: asyncpg.Connection) -> asyncpg.Connection:
    # The application's own table, beside venturi's, in the same database.
    await conn.execute("CREATE TABLE effects (job_id bigint PRIMARY KEY, n integer)")
    return conn


async def _effects(conn: asyncpg.Connection) -> list[int]:
    return [r["job_id"] for r in await conn.fetch("SELECT job_id FROM effects ORDER BY 1")]


async def test_the_handlers_write_and_the_completion_commit_together(
    dsn: str, effects: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="t_ok")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            await ctx.complete(conn, result={"wrote": carry.n})

    job_id = await handler.enqueue(effects, Item(7))
    worker = Worker(None, dsn, [handler], poll_max=0.2)
    async with running(worker):
        await wait_status(effects, job_id, "completed")
        await wait_until(lambda: worker.jobs_held() == 0)
    assert await _effects(effects) == [job_id]
    assert await venturi.get_result(effects, job_id) == {"wrote": 7}
    journal = await venturi.get_journal(effects, job_id)
    assert events(journal) == ["enqueued", "claimed", "completed"]
    # The worker wrote no settlement of its own after the block.
    assert worker.stats["completed"] == 1 and worker.stats["ownership_lost"] == 0


async def test_a_handler_raising_inside_the_block_leaves_neither(
    dsn: str, effects: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="t_raise", max_failures=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            await ctx.complete(conn)
            raise RuntimeError("after the completion, before the commit")

    job_id = await handler.enqueue(effects, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.2)):
        await wait_status(effects, job_id, "dead")
    assert await _effects(effects) == []
    job = await venturi.get_job(effects, job_id)
    assert job is not None and job.last_error is not None
    assert "after the completion, before the commit" in job.last_error


async def test_a_lost_claim_raises_claim_lost_and_rolls_the_writes_back(
    dsn: str, effects: asyncpg.Connection, kinds: list[str]
) -> None:
    entered = asyncio.Event()
    stolen = asyncio.Event()
    raised: list[BaseException] = []

    @venturi.task(kind="t_lost", backoff=Backoff.fixed(3600))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        entered.set()
        await stolen.wait()
        try:
            async with ctx.transaction() as conn:
                await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
                await ctx.complete(conn)
        except venturi.ClaimLost as exc:
            raised.append(exc)
            raise

    job_id = await handler.enqueue(effects, Item(1))
    thief = uuid.uuid4()
    async with running(Worker(None, dsn, [handler], poll_max=0.2)):
        await asyncio.wait_for(entered.wait(), 15)
        # Seeded: another run holds the claim now (what a recovery and a re-claim leave).
        await effects.execute(
            "UPDATE venturi.jobs SET claim_token = $1 WHERE id = $2", thief, job_id
        )
        stolen.set()
        await wait_until(lambda: bool(raised))
    assert isinstance(raised[0], venturi.ClaimLost) and raised[0].job_id == job_id
    assert await _effects(effects) == []
    row = await effects.fetchrow(
        "SELECT status, claim_token FROM venturi.jobs WHERE id = $1", job_id
    )
    assert (row["status"], row["claim_token"]) == ("claimed", thief)  # the new owner's


async def test_after_a_committed_completion_the_handlers_ending_is_ignored(
    dsn: str, effects: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    @venturi.task(kind="t_after")
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            await ctx.complete(conn)
        return venturi.retry(after=60)

    job_id = await handler.enqueue(effects, Item(1))
    worker = Worker(None, dsn, [handler], poll_max=0.2)
    with caplog.at_level(logging.WARNING, logger="venturi.worker"):
        async with running(worker):
            await wait_status(effects, job_id, "completed")
            await wait_until(lambda: worker.jobs_held() == 0)
    assert "then ended with retry, which is ignored" in caplog.text
    assert (await venturi.get_job(effects, job_id)).status == "completed"  # type: ignore[union-attr]
    assert worker.stats["ownership_lost"] == 0


async def test_misuse_is_a_clear_error(
    dsn: str, effects: asyncpg.Connection, kinds: list[str]
) -> None:
    errors: list[str] = []

    @venturi.task(kind="t_misuse")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        try:
            await ctx.complete(effects)
        except venturi.VenturiError as exc:
            errors.append(str(exc))
        async with ctx.transaction() as conn:
            try:
                async with ctx.transaction():
                    pass
            except venturi.VenturiError as exc:
                errors.append(str(exc))
            await ctx.complete(conn)

    job_id = await handler.enqueue(effects, Item(1))
    async with running(Worker(None, dsn, [handler], poll_max=0.2)):
        await wait_status(effects, job_id, "completed")
    assert errors == [
        "ctx.complete(conn) takes the connection of the open ctx.transaction() block",
        "ctx.transaction() is already open: nest conn.transaction()",
    ]
    bare: Context[None] = Context(
        None,
        venturi.JobMeta(
            1,
            "k",
            venturi.Priority.NORMAL,
            1,
            0,
            (await venturi.get_job(effects, job_id)).created_at,  # type: ignore[union-attr]
        ),
    )
    with pytest.raises(venturi.VenturiError, match="needs a context made by a running worker"):
        bare.transaction()


async def test_drain_runs_transactional_handlers_and_capped_kinds(
    dsn: str, effects: asyncpg.Connection, pool: asyncpg.Pool, kinds: list[str]
) -> None:
    @venturi.task(kind="t_drain", global_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            await ctx.complete(conn)

    ids = [await handler.enqueue(effects, Item(i)) for i in range(3)]
    done = await venturi.testing.drain(pool, [handler])
    assert sorted(done) == ids and {j.status for j in done.values()} == {"completed"}
    assert await _effects(effects) == ids
    # On one shared Connection, the handler gets a clear error instead of a connection.
    other = await handler.enqueue(effects, Item(9))
    done = await venturi.testing.drain(effects, [handler])
    job = done[other]
    assert job.status == "pending" and job.last_error is not None
    assert "ctx.transaction() needs a pool" in job.last_error


async def test_a_block_that_committed_stands_when_its_connection_breaks_before_the_reset(
    dsn: str, effects: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the block's backend is terminated after its COMMIT answered and
    # before the pool resets the connection (a backend kill, a restart in between).
    from tests.support import sql as tsql

    armed: set[int] = set()
    reset = asyncpg.Connection.reset

    # asyncpg's own signature, which the pool calls.
    async def cut_then_reset(
        self: asyncpg.Connection,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None:
        pid = self.get_server_pid()
        if pid in armed:
            armed.discard(pid)
            other = await asyncpg.connect(dsn)
            try:
                assert await other.fetchval(tsql.statement("backend_terminate_wait"), pid)
            finally:
                await other.close()
        await reset(self, timeout=timeout)

    monkeypatch.setattr(asyncpg.Connection, "reset", cut_then_reset)
    went_on: list[int] = []

    @venturi.task(kind="t_cut_complete", max_failures=3)
    async def completes(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            await ctx.complete(conn, result=carry.n)
            armed.add(conn.get_server_pid())
        went_on.append(ctx.job.id)

    @venturi.task(kind="t_cut_write", max_failures=3)
    async def writes(ctx: Context[Any], carry: Item) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES ($1, $2)", ctx.job.id, carry.n)
            armed.add(conn.get_server_pid())
        went_on.append(ctx.job.id)

    done = await completes.enqueue(effects, Item(1))
    wrote = await writes.enqueue(effects, Item(2))
    worker = Worker(None, dsn, [completes, writes], poll_max=0.2)
    async with running(worker):
        await wait_status(effects, done, "completed")
        await wait_status(effects, wrote, "completed")
        await wait_until(lambda: worker.jobs_held() == 0)
    # The committed block was not reported as failed: the handler went on after it,
    # each job ran once, and no settlement was skipped as if the claim were lost.
    assert sorted(went_on) == [done, wrote]
    assert await _effects(effects) == [done, wrote]
    for job_id in (done, wrote):
        assert events(await venturi.get_journal(effects, job_id)) == [
            "enqueued",
            "claimed",
            "completed",
        ]
    assert worker.stats["ownership_lost"] == 0
