"""venturi.testing for applications: ``drain`` runs due jobs in-process to settlement, and
the pytest plugin hands out migrated throwaway databases."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import sql as tsql
from tests.support import wait_for
from venturi import Context, admin, testing

pytest_plugins = ["pytester"]


class Step(msgspec.Struct):
    n: int
    done: int = 0


@pytest.fixture
def tasks(kinds: list[str]) -> dict[str, venturi.Task[Any]]:
    @venturi.task(kind="t_complete")
    async def complete(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        ctx.state.append(("complete", carry.n))
        return venturi.complete({"n": carry.n})

    @venturi.task(kind="t_pause")
    async def pause(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        # Checkpoints twice, due again at once each time: drain keeps going.
        ctx.state.append(("pause", carry.done))
        if carry.done < 2:
            return venturi.pause(Step(carry.n, carry.done + 1))
        return venturi.complete(carry.done)

    # A retry due 0.1 s later: it comes due during the drain, which runs it.
    @venturi.task(kind="t_retry", backoff=venturi.Backoff.fixed(0.1))
    async def retry(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        if ctx.job.attempt == 1:
            return venturi.retry(reason="first try refused")
        return venturi.complete("second try")

    @venturi.task(kind="t_dead")
    async def dead(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        return venturi.dead("no such account")

    @venturi.task(kind="t_raise")  # default backoff: the retry waits half a second or more
    async def boom(ctx: Context[Any], carry: Step) -> None:
        raise RuntimeError("boom")

    @venturi.task(kind="t_chain")
    async def chain(ctx: Context[Any], carry: Step) -> None:
        # Enqueues the next link: jobs that appear during the drain run too.
        if carry.n > 0:
            await ctx.state.enqueue(chain, Step(carry.n - 1))

    return {t.kind: t for t in (complete, pause, retry, dead, boom, chain)}


class State(list[Any]):
    """What the handlers above see as ctx.state: a log, and how to enqueue a follow-up."""

    enqueue: Any = None


async def test_drain_runs_every_due_job_to_settlement(
    dsn: str, conn: asyncpg.Connection, tasks: dict[str, venturi.Task[Any]]
) -> None:
    ids = {kind: await task.enqueue(conn, Step(1)) for kind, task in tasks.items()}
    later = await tasks["t_complete"].enqueue(conn, Step(99), after=3600)

    async def enqueue(task: venturi.Task[Any], carry: Step) -> int:
        return await task.enqueue(conn_for_handlers, carry)

    conn_for_handlers = await asyncpg.connect(dsn)
    state = State()
    state.enqueue = enqueue
    try:
        outcomes = await testing.drain(dsn, tasks=tasks.values(), state=state)
    finally:
        await conn_for_handlers.close()

    assert outcomes[ids["t_complete"]].status == "completed"
    assert outcomes[ids["t_complete"]].result == {"n": 1}
    assert (outcomes[ids["t_pause"]].status, outcomes[ids["t_pause"]].result) == ("completed", 2)
    assert outcomes[ids["t_pause"]].carry == {"n": 1, "done": 2}
    assert [e for e in state if e[0] == "pause"] == [("pause", 0), ("pause", 1), ("pause", 2)]
    assert (outcomes[ids["t_retry"]].status, outcomes[ids["t_retry"]].attempt) == ("completed", 2)
    assert outcomes[ids["t_dead"]].status == "dead"
    assert outcomes[ids["t_dead"]].last_error == "no such account"
    # A raised exception: one failed execution, its retry not yet due, left pending.
    raised = outcomes[ids["t_raise"]]
    assert (raised.status, raised.failures) == ("pending", 1)
    assert raised.last_error is not None and "RuntimeError: boom" in raised.last_error
    # The chain's two follow-ups ran as well, and appear among the outcomes.
    chain = [j for j in outcomes.values() if j.kind == "t_chain"]
    assert [j.carry["n"] for j in chain] == [1, 0] and {j.status for j in chain} == {"completed"}
    # The job scheduled for later was left alone.
    assert later not in outcomes
    job = await venturi.get_job(conn, later)
    assert job is not None and job.status == "pending" and job.attempt == 0


async def test_drain_on_a_connection_sees_its_open_transaction(
    conn: asyncpg.Connection, tasks: dict[str, venturi.Task[Any]]
) -> None:
    state = State()
    tx = conn.transaction()
    await tx.start()
    try:
        first = await tasks["t_complete"].enqueue(conn, Step(1))
        second = await tasks["t_pause"].enqueue(conn, Step(2))
        outcomes = await testing.drain(conn, [tasks["t_complete"], tasks["t_pause"]], state)
        assert {i: j.status for i, j in outcomes.items()} == {
            first: "completed",
            second: "completed",
        }
    finally:
        await tx.rollback()
    # Everything happened inside the test's transaction: rolled back, nothing is left.
    assert await venturi.get_job(conn, first) is None
    # (That read ran on the same connection: it is usable afterwards.)


@pytest.mark.parametrize("open_transaction", [False, True])
async def test_drain_on_a_connection_runs_kinds_whose_claim_takes_a_transaction(
    conn: asyncpg.Connection, kinds: list[str], open_transaction: bool
) -> None:
    # A grouped kind with a global cap, and a kind with a shared rate, claim in a
    # transaction of their own (the kind's cap lock, the rate's bucket): on a Connection
    # drain handed the worker a stand-in without one, and the first claim failed with
    # AttributeError, inside the test's transaction or not.
    @venturi.task(kind="t_capped_groups", group_cap=1, global_cap=2)
    async def capped(ctx: Context[Any], carry: Step) -> None:
        return None

    @venturi.task(kind="t_shared_rate", rate=venturi.Rate(per_second=50, burst=3, shared=True))
    async def rated(ctx: Context[Any], carry: Step) -> None:
        return None

    tx = conn.transaction()
    if open_transaction:
        await tx.start()
    try:
        ids = await venturi.enqueue_many(
            conn,
            [capped.job(Step(i), group=f"g{i % 3}") for i in range(6)]
            + [rated.job(Step(i)) for i in range(3)],
        )
        outcomes = await testing.drain(conn, [capped, rated], concurrency=3, give_up_after=30)
        assert sorted(outcomes) == sorted(ids)
        assert {j.status for j in outcomes.values()} == {"completed"}
    finally:
        if open_transaction:
            await tx.rollback()


async def test_drain_in_an_open_transaction_leaves_its_deadlines_as_they_were(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A claim's own transaction (a shared rate's) sets the server's deadlines for its
    # rest; as a savepoint of the test's transaction they lasted to the test's end, and
    # an idle spell there past the worker's statement_timeout lost the connection.
    @venturi.task(kind="t_rate_deadlines", rate=venturi.Rate(per_second=50, burst=3, shared=True))
    async def rated(ctx: Context[Any], carry: Step) -> None:
        return None

    show = "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')"
    before = tuple(await conn.fetchrow(show))
    async with conn.transaction():
        ids = await venturi.enqueue_many(conn, [rated.job(Step(i)) for i in range(3)])
        outcomes = await testing.drain(conn, [rated], give_up_after=30, statement_timeout=1.0)
        assert sorted(outcomes) == sorted(ids)
        assert tuple(await conn.fetchrow(show)) == before


async def test_drain_in_an_open_transaction_refills_a_groups_tokens(
    conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The group's bucket refilled by now(), the transaction's start: inside the test's
    # transaction it never moved, the bucket stayed empty, and the drain gave up.
    @venturi.task(kind="t_group_rate", group_rate=venturi.Rate(per_second=20, burst=1))
    async def rated(ctx: Context[Any], carry: Step) -> None:
        return None

    async with conn.transaction():
        ids = await venturi.enqueue_many(conn, [rated.job(Step(i), group="a") for i in range(3)])
        outcomes = await testing.drain(conn, [rated], give_up_after=30)
        assert sorted(outcomes) == sorted(ids)
        assert {j.status for j in outcomes.values()} == {"completed"}


async def test_drain_on_a_connection_leaves_no_listen_behind(
    conn: asyncpg.Connection, tasks: dict[str, venturi.Task[Any]]
) -> None:
    # A job that pauses twice: the drain's worker is up long enough to LISTEN.
    job_id = await tasks["t_pause"].enqueue(conn, Step(3))
    outcomes = await testing.drain(conn, [tasks["t_pause"]], State())
    assert outcomes[job_id].status == "completed"
    assert await conn.fetchval(tsql.statement("listening_channels")) == []


async def test_drain_on_a_connection_renews_a_long_job_s_lease(
    conn: asyncpg.Connection, dsn: str, kinds: list[str]
) -> None:
    # On one connection the heartbeat takes its turn like every other statement: its
    # tick used to fail (``async with`` on a coroutine) once a handler ran past it.
    @venturi.task(kind="t_long", lease=1.0, renew_lease=True)
    async def long(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        other = await asyncpg.connect(dsn)
        try:
            job = await venturi.get_job(other, ctx.job.id)
            assert job is not None and job.claim_expires_at is not None
            first = job.claim_expires_at

            async def renewed() -> bool:
                job = await venturi.get_job(other, ctx.job.id)
                now = None if job is None else job.claim_expires_at
                return now is not None and now > first  # pushed back, not recovered

            # The database holds the renewal: no event announces it, so it is polled.
            await wait_for(renewed, within=30, every=0.05)
        finally:
            await other.close()
        return venturi.complete("renewed")

    await long.enqueue(conn, Step(1))
    outcomes = await testing.drain(conn, [long], heartbeat=0.1)
    assert [(j.status, j.result) for j in outcomes.values()] == [("completed", "renewed")], [
        j.last_error for j in outcomes.values()
    ]


async def test_drain_on_a_pool_with_worker_options(
    pool: asyncpg.Pool, tasks: dict[str, venturi.Task[Any]]
) -> None:
    job = await tasks["t_raise"].enqueue(pool, Step(1))
    outcomes = await testing.drain(pool, [tasks["t_raise"]], failures_to_dead=True)
    assert outcomes[job].status == "dead"


async def test_drain_with_nothing_due_returns_at_once(
    dsn: str, tasks: dict[str, venturi.Task[Any]]
) -> None:
    assert await testing.drain(dsn, [tasks["t_complete"]]) == {}


async def test_drain_gives_up_on_work_that_never_settles(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="t_forever")
    async def forever(ctx: Context[Any], carry: Step) -> venturi.Outcome:
        return venturi.pause(carry)

    job = await forever.enqueue(conn, Step(1))
    with pytest.raises(TimeoutError, match=r"1 job\(s\) of t_forever still due after 0.5s"):
        await testing.drain(dsn, [forever], give_up_after=0.5)
    # The worker was stopped properly: the job is not left claimed.
    info = await venturi.get_job(conn, job)
    assert info is not None and info.status == "pending" and info.attempt >= 1


async def test_drain_names_a_paused_group_when_it_gives_up(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A paused group's job is due and never claimed, as a paused kind's is: the hint
    # names both, so that a test author looks at the group's settings too.
    @venturi.task(kind="t_grouped", group_cap=1)
    async def grouped(ctx: Context[Any], carry: Step) -> None:
        return None

    await venturi.set_group(conn, "t_grouped", "acme", paused=True)
    job = await grouped.enqueue(conn, Step(1), group="acme")
    with pytest.raises(TimeoutError, match=r"a paused kind or group\?"):
        await testing.drain(dsn, [grouped], give_up_after=0.5)
    info = await venturi.get_job(conn, job)
    assert info is not None and info.status == "pending" and info.attempt == 0


async def test_drain_ignores_other_kinds_and_refuses_nonsense(
    dsn: str, conn: asyncpg.Connection, tasks: dict[str, venturi.Task[Any]]
) -> None:
    other = await tasks["t_dead"].enqueue(conn, Step(1))
    mine = await tasks["t_complete"].enqueue(conn, Step(1))
    outcomes = await testing.drain(dsn, [tasks["t_complete"]], State())
    assert list(outcomes) == [mine]
    assert (await admin.list_jobs(conn, status="pending"))[0].id == other
    with pytest.raises(venturi.ConfigError, match="give the tasks"):
        await testing.drain(dsn, [])
    with pytest.raises(venturi.ConfigError, match="target must be"):
        await testing.drain(42, [tasks["t_complete"]])


async def test_drain_needs_the_schema(empty_dsn: str, tasks: dict[str, venturi.Task[Any]]) -> None:
    with pytest.raises(venturi.SchemaError, match="venturi schema apply"):
        await testing.drain(empty_dsn, [tasks["t_complete"]])


# --- the pytest plugin ----------------------------------------------------------------


async def test_an_application_test_suite_uses_the_plugin(
    pytester: pytest.Pytester, pg_admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An application's own test file, run by pytest in a subprocess: nothing but the
    # installed plugin provides venturi_dsn.
    pytester.makeini(
        """
        [pytest]
        asyncio_mode = auto
        asyncio_default_fixture_loop_scope = function
        filterwarnings = error
        """
    )
    pytester.makepyfile(
        test_app=textwrap.dedent(
            """
            import asyncpg
            import msgspec
            import venturi
            from venturi import testing


            class Welcome(msgspec.Struct):
                email: str


            @venturi.task(kind="welcome")
            async def welcome(ctx, carry: Welcome):
                return venturi.complete(f"sent to {carry.email}")


            async def test_signup_sends_a_welcome(venturi_dsn):
                conn = await asyncpg.connect(venturi_dsn)
                try:
                    async with conn.transaction():
                        job = await welcome.enqueue(conn, Welcome("a@example.test"))
                finally:
                    await conn.close()
                outcomes = await testing.drain(venturi_dsn, tasks=[welcome])
                assert outcomes[job].status == "completed"
                assert outcomes[job].result == "sent to a@example.test"


            SEEN = []


            def test_each_test_gets_its_own_database(venturi_dsn):
                # A plain (sync) test can use the fixture as well.
                SEEN.append(venturi_dsn)


            def test_again_a_fresh_database(venturi_dsn):
                assert SEEN and venturi_dsn not in SEEN
            """
        )
    )
    monkeypatch.setenv("VENTURI_TEST_DSN", pg_admin_dsn)  # the server this session found
    result = await asyncio.to_thread(pytester.runpytest_subprocess, "-q")
    result.assert_outcomes(passed=3)


async def test_a_factory_drops_the_databases_tests_are_done_with_a_batch_at_a_time(
    pg_admin_dsn: str,
) -> None:
    # Each drop waits for a checkpoint of the whole server; drops sent together share one.
    factory = testing.DatabaseFactory(pg_admin_dsn)
    await factory.setup()
    admin_conn = await asyncpg.connect(pg_admin_dsn)

    async def existing(names: list[str]) -> list[str]:
        rows = await admin_conn.fetch(
            "SELECT datname FROM pg_database WHERE datname = ANY ($1::text[])", names
        )
        return sorted(r["datname"] for r in rows)

    def name_of(dsn: str) -> str:
        return dsn.rsplit("/", 1)[1].split("?")[0]

    try:
        dsns = [await factory.create() for _ in range(testing.databases.DROP_BATCH)]
        names = sorted(name_of(d) for d in dsns)
        left_open = await asyncpg.connect(dsns[0])  # a test that forgot to close it
        for dsn in dsns[:-1]:
            await factory.release(dsn)
        assert await existing(names) == names
        await factory.release(dsns[-1])
        assert await existing(names) == []
        assert left_open.is_closed() or not await _answers(left_open)
        left_open.terminate()
        last = await factory.create()
        await factory.release(last)
        assert await existing([name_of(last), factory.template]) == sorted(
            [name_of(last), factory.template]
        )
        # ``drop`` does not wait for a batch: the database is gone when it returns.
        now = await factory.create()
        await factory.drop(now)
        assert await existing([name_of(now), name_of(last)]) == [name_of(last)]
        await factory.teardown()
        assert await existing([name_of(last), factory.template]) == []
    finally:
        await admin_conn.close()


async def _answers(conn: asyncpg.Connection) -> bool:
    try:
        await conn.fetchval("SELECT 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError):
        return False
    return True
