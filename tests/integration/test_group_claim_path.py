"""The claim path of a worker with grouped kinds (SPEC 13; migration 21): the claim of
jobs without a group never reads a grouped row, completions ride the grouped claim
under the ownership guard, the grouped claim is prepared once and keeps a generic plan,
a worker whose groups are all at their caps claims again as its jobs finish, and a busy
worker's claim of jobs without a group rests once it finds none (runtime/loop.py)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_until
from tests.support.claims import claimer as make_claimer
from tests.support.plans import nodes
from venturi import Context, JobSpec, admin, db, sql
from venturi.runtime import limits
from venturi.runtime.claimer import Claimer
from venturi.runtime.limits import GROUPED_RECHECK
from venturi.runtime.loop import PLAIN_RECHECK, Loop
from venturi.runtime.worker import Worker

SCHEMA = "venturi"
W1 = db.Claimant("w:1")
CAP1 = db.groups.GroupLimits(1, None, None)


async def _grouped(conn: asyncpg.Connection, n: int, groups: int) -> None:
    specs = [JobSpec("k", "{}", 1, None, None, None, 25, group=f"g{i % groups}") for i in range(n)]
    await db.enqueue.job_insert_many(conn, schema=SCHEMA, specs=specs)


async def _claim_grouped(
    conn: Any,
    limit: int,
    done: Sequence[tuple[int, int, str | None]] = (),
    kind: str = "k",
    limits: db.groups.GroupLimits = CAP1,
) -> db.groups.GroupedClaim:
    """One grouped claim of ``kind`` (of kind k, group_cap 1, unless told), as the
    worker's, with ``done`` riding it."""
    claim, _ = await db.groups.claim_grouped(
        conn,
        schema=SCHEMA,
        claimant=W1,
        kind=kind,
        lease=60.0,
        floor=0,
        limit=limit,
        limits=limits,
        done=done,
    )
    return claim


async def _claim_all(conn: Any, wanted: int) -> list[asyncpg.Record]:
    """Grouped claims until ``wanted`` jobs are claimed (the first applies the wake-ups)."""
    rows: list[asyncpg.Record] = []
    for _ in range(10):
        rows += (await _claim_grouped(conn, wanted - len(rows))).claimed
        if len(rows) >= wanted:
            return rows
    raise AssertionError(f"claimed {len(rows)} of {wanted}")


async def test_the_claim_of_jobs_without_a_group_reads_no_grouped_row(
    conn: asyncpg.Connection,
) -> None:
    # 2,000 grouped jobs of the kind, older than its one job without a group: the claim
    # of jobs without a group (job_claim) used to read each of them to leave it out.
    await _grouped(conn, 2000, 50)
    await db.enqueue.job_insert_many(
        conn, schema=SCHEMA, specs=[JobSpec("k", "{}", 1, None, None, None, 25)]
    )
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    plan = await conn.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.statement("job_claim", SCHEMA),
        "w:1",
        ["k"],
        [60.0],
        0,
        10,
        [],
        [],
        [],
        uuid.uuid4(),
        True,
    )
    found = nodes(json.loads(plan))
    jobs_reads = [n for n in found if n.get("Relation Name") == "jobs" and n.get("Actual Loops")]
    removed = sum(int(n.get("Rows Removed by Filter", 0)) for n in jobs_reads)
    claimed = [n for n in found if n.get("Node Type") == "ModifyTable" and n.get("Actual Rows")]
    assert claimed and claimed[0]["Actual Rows"] == 1  # the one job without a group
    assert removed == 0, f"the claim read {removed} rows it left out"
    # Every pending job still counts: the operators' counts read both indexes.
    stats = await admin.stats(conn)
    assert {k.kind: k.due for k in stats.kinds} == {"k": 2000}  # one claimed


async def test_completions_ride_the_grouped_claim_only_for_the_run_that_owns_them(
    conn: asyncpg.Connection,
) -> None:
    await _grouped(conn, 6, 3)  # three groups of two, group_cap 1
    first = await _claim_all(conn, 3)
    assert sorted(r["grp"] for r in first) == ["g0", "g1", "g2"]
    done = [(r["id"], r["attempt"], None) for r in first[:2]]
    stale = (first[2]["id"], first[2]["attempt"] + 1, None)  # an attempt it does not hold
    claim = await _claim_grouped(conn, 10, [*done, stale])
    assert claim.settled == {first[0]["id"], first[1]["id"]}
    status = dict(await conn.fetch("SELECT id, status FROM venturi.jobs"))
    assert [status[r["id"]] for r in first] == ["completed", "completed", "claimed"]
    # A completion that applied frees its group's place in the claim it rides (they
    # commit together): the claim takes the freed groups' second jobs, not g2's (still at
    # its cap: its completion did not apply).
    assert sorted(r["grp"] for r in claim.claimed) == ["g0", "g1"]
    assert (await _claim_grouped(conn, 10)).claimed == []


async def _ready(conn: asyncpg.Connection, group: str) -> bool:
    return bool(
        await conn.fetchval("SELECT ready FROM venturi.groups WHERE kind = 'k' AND grp = $1", group)
    )


async def test_the_claim_that_wakes_a_group_takes_its_job(
    conn: asyncpg.Connection,
) -> None:
    # A group first seen: the claim that inserts its row takes its job, and parks it (its
    # only job taken), in one claim, as a job without a group is taken...
    await _grouped(conn, 1, 1)
    first = await _claim_grouped(conn, 5)
    assert ([r["grp"] for r in first.claimed], first.woken, first.parked) == (["g0"], 0, 1)
    (job,) = first.claimed
    assert not await _ready(conn, "g0")
    row = await conn.fetchrow("SELECT claims, vtime FROM venturi.groups WHERE grp = 'g0'")
    assert (row["claims"], row["vtime"]) == (1, 1.0)  # counted as a claim of the row's
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 0
    # ...and so is a known group's next job, by the claim that wakes the group: an idle
    # tenant's job waits no claim more than a job without a group.
    await _grouped(conn, 1, 1)
    # (the completion riding it frees g0's place in it).
    woke = await _claim_grouped(conn, 5, [(job["id"], job["attempt"], None)])
    (second,) = woke.claimed
    assert second["grp"] == "g0" and woke.settled == {job["id"]}
    assert (woke.woken, await _ready(conn, "g0")) == (0, False)  # its only job taken
    await _claim_grouped(conn, 5, [(second["id"], second["attempt"], None)])
    await _grouped(conn, 1, 1)
    (third,) = (await _claim_grouped(conn, 5)).claimed
    assert third["grp"] == "g0" and not await _ready(conn, "g0")
    # A paused group's wake-up is applied and nothing is taken from it: it stays out of
    # the ready groups until it is resumed, and then the claim that wakes it takes its job.
    await _claim_grouped(conn, 5, [(third["id"], third["attempt"], None)])
    await venturi.set_group(conn, "k", "g0", paused=True)
    await _grouped(conn, 1, 1)
    paused = await _claim_grouped(conn, 5)
    assert (paused.claimed, paused.woken, await _ready(conn, "g0")) == ([], 0, False)
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 0
    await venturi.set_group(conn, "k", "g0", paused=False)
    assert [r["grp"] for r in (await _claim_grouped(conn, 5)).claimed] == ["g0"]


async def test_claims_that_first_see_one_group_at_once_keep_its_cap(
    dsn: str, conn: asyncpg.Connection
) -> None:
    """Two claims meet a group first seen at once: only the claim whose insert made the
    group's row takes its jobs; the other passes the group by at once (its row lock is the
    first's: it waited for the first's transaction before), takes none, and leaves its
    wake-up for the next claim."""
    await _grouped(conn, 1, 1)  # g0's first job
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        tx = first.transaction()
        await tx.start()
        (j1,) = (await _claim_grouped(first, 5)).claimed  # g0's row inserted, not committed
        # A second job of g0, of a higher tier (the second claim's first pick), with a
        # wake-up the first claim never saw: the second claim sees g0 first too.
        spec = JobSpec("k", "{}", 0, None, None, None, 25, group="g0")
        (j2,) = await db.enqueue.job_insert_many(conn, schema=SCHEMA, specs=[spec])
        late = await _claim_grouped(second, 5)  # not waiting for the first's commit
        await tx.commit()
    finally:
        await first.close()
        await second.close()
    assert late.claimed == []  # g0's cap is 1 and j1 runs: j2 stays pending
    status = dict(await conn.fetch("SELECT id, status FROM venturi.jobs"))
    assert (status[j1["id"]], status[j2]) == ("claimed", "pending")
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 1  # j2's
    # The next claims: g0 at its cap while j1 runs, then j2 in the claim j1's completion
    # rides (which frees g0's place in it).
    assert (await _claim_grouped(conn, 5)).claimed == []
    got = await _claim_grouped(conn, 5, [(j1["id"], j1["attempt"], None)])
    assert [r["id"] for r in got.claimed] == [j2]


async def test_a_completion_riding_a_grouped_claim_frees_its_groups_place_in_it(
    conn: asyncpg.Connection,
) -> None:
    # The completion is settled in the claim's own statement, so it commits with it: its
    # group's place is free in that claim. Counted (the snapshot's claimed row), a group
    # at its cap lost each place it freed to the groups behind it: a group of weight 3
    # under a cap of 3 ran 142-150 of 300 jobs where its share is 180 (docs/groups.md).
    await _grouped(conn, 2, 1)  # g0: two jobs, cap 1
    (j1,) = await _claim_all(conn, 1)
    (j2,) = (await _claim_grouped(conn, 5, [(j1["id"], j1["attempt"], None)])).claimed
    assert j2["id"] != j1["id"]
    status = dict(await conn.fetch("SELECT id, status FROM venturi.jobs"))
    assert (status[j1["id"]], status[j2["id"]]) == ("completed", "claimed")


@pytest.mark.parametrize("known", [False, True], ids=["first-seen", "known"])
async def test_a_claim_that_wakes_more_groups_than_its_batch_makes_the_rest_ready(
    conn: asyncpg.Connection, known: bool
) -> None:
    if known:  # five groups, known once their first jobs ran
        await _grouped(conn, 5, 5)
        await _claim_grouped(
            conn, 5, [(r["id"], r["attempt"], None) for r in await _claim_all(conn, 5)]
        )
        assert [await _ready(conn, f"g{i}") for i in range(5)] == [False] * 5
    await _grouped(conn, 5, 5)  # one job each: five wake-ups
    first = await _claim_grouped(conn, 2)
    # It takes from two of the groups it wakes (or first sees) and makes the other three
    # ready, with no wake-up left: the next claim takes their jobs from the ready groups.
    assert (len(first.claimed), first.woken) == (2, 3)
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 0
    rest = (await _claim_grouped(conn, 5)).claimed
    assert sorted(r["grp"] for r in first.claimed + rest) == [f"g{i}" for i in range(5)]


async def test_a_group_first_seen_gives_up_to_its_cap_and_stays_ready(
    conn: asyncpg.Connection,
) -> None:
    await _grouped(conn, 3, 1)  # g0: three jobs, one wake-up
    cap2 = db.groups.GroupLimits(2, None, None)
    claim, _ = await db.groups.claim_grouped(
        conn, schema=SCHEMA, claimant=W1, kind="k", lease=60.0, floor=0, limit=5, limits=cap2
    )
    assert (len(claim.claimed), claim.woken, claim.parked) == (2, 0, 0)
    row = await conn.fetchrow("SELECT ready, claims, vtime, task_cap FROM venturi.groups")
    assert tuple(row) == (True, 2, 2.0, 2)  # its third job is the next claims'


async def test_the_worker_s_grouped_claim_is_prepared_once_and_keeps_a_generic_plan(
    pool: asyncpg.Pool,
) -> None:
    # Through the loop's held connection, as a worker claims: the statement (16 KiB,
    # past asyncpg's default cache limit) was parsed and planned anew for every claim,
    # and even prepared, its floor, rate and global cap folded into constants made each
    # custom plan look cheaper than the generic one.
    await _grouped(pool, 200, 100)
    await pool.execute(sql.statement("maintenance/analyze", SCHEMA))
    held = db.held.Held(pool)
    try:
        for _ in range(8):
            await _claim_grouped(held, 1)
        (stmt, _), *_ = held._plans.values()
        assert "job_claim_grouped" in stmt.get_query()
        generic = await held.conn.fetchval(
            "SELECT generic_plans FROM pg_prepared_statements WHERE name = $1", stmt.get_name()
        )
        assert generic >= 2
    finally:
        await held.close()


async def test_a_claim_past_its_bounds_takes_what_they_allow_and_says_to_claim_again(
    conn: asyncpg.Connection,
) -> None:
    # The claim's bounds (JOB_BOUND 100 jobs of one group, GROUP_BOUND 500 ready groups,
    # for the planner's estimates: test_claim_plan) only reach a claim of more than 100.
    # One group without a cap, 150 jobs: a claim of 150 takes its first 100 and counts
    # itself busy, so that its worker claims again at once.
    specs = [JobSpec("u", "{}", 1, None, None, None, 25, group="one") for _ in range(150)]
    await db.enqueue.job_insert_many(conn, schema=SCHEMA, specs=specs)
    uncapped = db.groups.GroupLimits(None, None, None)
    first = await _claim_grouped(conn, 150, kind="u", limits=uncapped)
    assert (len(first.claimed), first.busy) == (100, 1)
    second = await _claim_grouped(conn, 150, kind="u", limits=uncapped)
    assert (len(second.claimed), second.busy) == (50, 0)
    # 600 ready groups of cap 1, a job each: a claim of 700 locks the first 500.
    await _grouped(conn, 600, 600)
    assert (await _claim_grouped(conn, 0)).claimed == []  # their wake-ups: ready
    first = await _claim_grouped(conn, 700)
    assert (len(first.claimed), first.busy) == (500, 1)
    second = await _claim_grouped(conn, 700)
    assert (len(second.claimed), second.busy) == (100, 0)


async def test_a_connection_caches_the_grouped_claim(dsn: str) -> None:
    # Outside the held connection (a claim within a global cap or a shared rate runs in
    # a transaction of its own), asyncpg's own cache must take the statement.
    conn = await db.connect.connect(dsn)
    try:
        text = sql.statement("job_claim_grouped", SCHEMA)
        assert len(text) > 15 * 1024  # asyncpg's default limit
        args: tuple[Any, ...] = (
            "w:1",
            "k",
            60.0,
            0,
            1,
            uuid.uuid4(),
            1,
            None,
            None,
            None,
            True,
            [],
            [],
            [],
        )
        for _ in range(2):
            async with conn.transaction():
                await conn.fetch(text, *args)
        cached = await conn.fetchval(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", text
        )
        assert cached == 1
    finally:
        await conn.close()


async def test_a_worker_whose_groups_are_all_at_their_caps_claims_again_as_they_finish(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Every group at its cap and nothing else to run: the claim that carries the
    # finished jobs' completions still sees their slots taken (its snapshot), and found
    # nothing. It must claim again at once, not sleep poll_max (60 s here: the drain of
    # 24 jobs of a few milliseconds each took concurrency jobs per poll_max before).
    done = 0

    @venturi.task(kind="g_capped", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        nonlocal done
        done += 1

    await venturi.enqueue_many(conn, [handler.job(Item(i), group=f"g{i % 4}") for i in range(24)])
    worker = Worker(None, dsn, [handler], concurrency=4, poll_max=60)
    async with running(worker):
        await wait_until(lambda: done == 24, within=20)
    assert worker.stats["claimed"] == 24


async def test_a_busy_grouped_worker_claims_a_job_without_a_group_that_comes_due(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The claim of jobs without a group rests while the groups keep the worker busy
    # (runtime/loop.py, PLAIN_RECHECK): a job that becomes visible by its time, which
    # no notification announces, must still be claimed while the groups' work goes on.
    grouped_done = 0
    plain_ran_at: list[int] = []

    # Groups enough to fill every free slot at each claim: the loop never idles, so
    # its look-up of the next visible job never runs either.
    @venturi.task(kind="g_busy", group_cap=1000)
    async def busy(ctx: Context[Any], carry: Item) -> None:
        nonlocal grouped_done
        await asyncio.sleep(0.005)  # stays: the groups keep every slot busy a while
        grouped_done += 1

    @venturi.task(kind="g_plain")
    async def plain(ctx: Context[Any], carry: Item) -> None:
        plain_ran_at.append(grouped_done)

    total = 3000
    await venturi.enqueue_many(conn, [busy.job(Item(i), group=f"t{i % 100}") for i in range(total)])
    worker = Worker(None, dsn, [busy, plain], concurrency=16, poll_max=30)
    async with running(worker):
        await wait_until(lambda: grouped_done > 0)
        # Visible by its time (the subject of the test): no notification says so.
        await plain.enqueue(conn, Item(0), after=0.3)
        await wait_until(lambda: grouped_done == total and bool(plain_ran_at), within=60)
    assert plain_ran_at[0] < total, (plain_ran_at, total)


async def test_a_job_without_a_group_enqueued_during_the_claim_that_found_none_is_claimed(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim of jobs without a group rests after it found none, until a notification
    comes (runtime/loop.py, PLAIN_RECHECK). A job committed after that claim's snapshot
    is notified while the claim is still in flight: that notification must end the rest.
    (It was counted as seen before the claim, and the job waited poll_max: a grouped
    worker's pickup probe met it once the grouped claim took a new group's job at once.)"""

    @venturi.task(kind="g_kind", group_cap=1)
    async def grouped(ctx: Context[Any], carry: Item) -> None:
        return None

    started = asyncio.Event()

    @venturi.task(kind="g_plain")
    async def plain(ctx: Context[Any], carry: Item) -> None:
        started.set()

    notified = asyncio.Event()
    real_notify, real_fill = Loop.on_notify, Claimer.fill
    fired = False

    def on_notify(self: Loop, payload: str) -> None:
        real_notify(self, payload)
        notified.set()

    async def fill(self: Claimer, *args: Any) -> tuple[int, bool, bool]:
        nonlocal fired
        out = await real_fill(self, *args)
        if not fired:  # the first claim, which found none: the job lands as it returns
            fired = True
            await plain.enqueue(conn, Item(0))
            await notified.wait()  # its notification, handled before the claim's answer
        return out

    monkeypatch.setattr(Loop, "on_notify", on_notify)
    monkeypatch.setattr(Claimer, "fill", fill)
    worker = Worker(None, dsn, [grouped, plain], concurrency=4, poll_max=30)
    async with running(worker):
        await asyncio.wait_for(started.wait(), 10)  # not poll_max
    assert fired


async def test_a_grouped_drain_does_not_repeat_an_empty_claim_of_jobs_without_a_group(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    done = 0

    @venturi.task(kind="g_only", group_cap=1000)
    async def only(ctx: Context[Any], carry: Item) -> None:
        nonlocal done
        done += 1

    total = 3000
    await venturi.enqueue_many(conn, [only.job(Item(i), group=f"t{i % 100}") for i in range(total)])
    worker = Worker(None, dsn, [only], concurrency=32, poll_max=30)
    loop = asyncio.get_running_loop()
    async with running(worker):
        await wait_until(lambda: done > 0)
        began, empty_then = loop.time(), worker.stats["empty_claims"]
        await wait_until(lambda: done == total, within=60)
        empty = worker.stats["empty_claims"] - empty_then
        elapsed = loop.time() - began
    # One claim of jobs without a group per PLAIN_RECHECK (0.05 s) at most while the
    # groups keep the worker busy, plus the few grouped claims that find nothing at the
    # end. Without the rest it ran on every other iteration: one empty claim per two
    # grouped claims of the drain's hundred or more.
    assert empty <= elapsed / PLAIN_RECHECK + 10, (empty, elapsed, worker.stats)


async def test_idle_grouped_kinds_are_not_claimed_at_every_turn(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each grouped kind is claimed in a statement of its own: a worker of one busy grouped
    # kind and idle ones claimed every idle one at every turn (a worker of 19 drained at a
    # quarter of the pace, benchmarks/JOURNAL.md). An idle one's claim that finds nothing
    # to do now rests for GROUPED_RECHECK.
    done = 0

    def declare(kind: str) -> venturi.Task[Item]:
        @venturi.task(kind=kind, group_cap=2)
        async def handler(ctx: Context[Any], carry: Item) -> None:
            nonlocal done
            done += 1

        return handler

    busy, idle = declare("g_busy_kind"), [declare(f"g_idle_kind_{i}") for i in range(10)]
    total = 3000
    await venturi.enqueue_many(conn, [busy.job(Item(i), group=f"t{i % 50}") for i in range(total)])
    claims: Counter[str] = Counter()
    real_claim = db.groups.claim_grouped

    async def counted(*args: Any, **kw: Any) -> Any:
        claims[kw["kind"]] += 1
        return await real_claim(*args, **kw)

    monkeypatch.setattr(db.groups, "claim_grouped", counted)
    worker = Worker(None, dsn, [busy, *idle], concurrency=16, poll_max=30)
    loop = asyncio.get_running_loop()
    async with running(worker):
        await wait_until(lambda: done > 0)
        began, then = loop.time(), Counter(claims)
        await wait_until(lambda: done == total, within=60)
        elapsed = loop.time() - began
        idle_claims = [claims[t.kind] - then[t.kind] for t in idle]
    # Each idle kind once per GROUPED_RECHECK at most (and once at the drain's end); the
    # busy kind was claimed more than any. Without the rest, every idle kind as often
    # as the busy one.
    assert max(idle_claims) <= elapsed / GROUPED_RECHECK + 2, (idle_claims, elapsed)
    assert claims[busy.kind] - then[busy.kind] > 4 * max(idle_claims), (claims, idle_claims)


async def test_a_resting_grouped_kind_is_claimed_at_once_when_named_or_its_run_ends(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the rest made an hour, the kind's jobs run before the other kind's backlog ends
    # only because the enqueue's notification names the kind (the first) and each run's
    # end frees its group's slot (the next two, cap 1).
    monkeypatch.setattr(limits, "GROUPED_RECHECK", 3600.0)
    plain_done, grouped_at = 0, []

    @venturi.task(kind="g_backlog")
    async def backlog(ctx: Context[Any], carry: Item) -> None:
        nonlocal plain_done
        plain_done += 1

    @venturi.task(kind="g_resting", group_cap=1)
    async def resting(ctx: Context[Any], carry: Item) -> None:
        grouped_at.append(plain_done)
        # stays: long enough that the kind's claims meanwhile find its group at its cap,
        # and rest; only the run's end may wake the kind for the next job.
        await asyncio.sleep(0.05)

    total = 20_000
    await venturi.enqueue_many(conn, [backlog.job(Item(i)) for i in range(total)])
    worker = Worker(None, dsn, [backlog, resting], concurrency=8, poll_max=30)
    async with running(worker):
        await wait_until(lambda: worker._loop is not None)
        assert worker._loop is not None
        dry = worker._loop.claimer.limits.grouped_dry
        await wait_until(lambda: "g_resting" in dry)  # its claim found nothing
        await venturi.enqueue_many(conn, [resting.job(Item(i), group="acme") for i in range(3)])
        await wait_until(lambda: len(grouped_at) == 3 or plain_done == total, within=60)
    assert len(grouped_at) == 3 and grouped_at[-1] < total, (grouped_at, plain_done)


async def test_a_resting_grouped_kind_is_claimed_when_its_wake_up_comes_due(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second job waits for its group's next token (a wake-up a second later, no
    # notification): the idle worker sleeps until then and, woken by the time alone,
    # claims the kind it left resting (with the rest made an hour, not after poll_max).
    monkeypatch.setattr(limits, "GROUPED_RECHECK", 3600.0)
    ran = asyncio.Queue[int]()

    @venturi.task(kind="g_token", group_rate=venturi.Rate(per_second=1, burst=1))
    async def token(ctx: Context[Any], carry: Item) -> None:
        ran.put_nowait(carry.n)

    await venturi.enqueue_many(conn, [token.job(Item(i), group="acme") for i in range(2)])
    async with running(Worker(None, dsn, [token], concurrency=4, poll_max=30)):
        assert await asyncio.wait_for(ran.get(), 10) == 0
        assert await asyncio.wait_for(ran.get(), 10) == 1  # not poll_max


async def test_a_due_wake_up_of_a_resting_kind_is_an_answer_to_the_idle_lookup(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The idle lookup reports the wake-ups still to come (a due one is a claim's to
    # apply). A kind at rest has none applied: a loop woken by something else (another
    # kind's run ending) after its group's token came due, and before its rest ended,
    # found nothing due and slept poll_max. Its due wake-up is due now for the lookup.
    @venturi.task(kind="g_rest_due", group_cap=1)
    async def resting(ctx: Context[Any], carry: Item) -> None: ...

    claimer = make_claimer(dsn, resting, poll_max=30)  # its idle lookup may sleep 30 s
    await resting.enqueue(conn, Item(1), group="acme")  # its wake-up row, due now
    claimer.limits.found(claimer.limits.grouped_dry, "g_rest_due", GROUPED_RECHECK)
    assert await claimer.until_next_visible(conn) == 0.0  # was poll_max


async def test_a_due_job_of_a_paused_group_does_not_wake_the_idle_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # A grouped job has wake-ups of its own (group_wakes); the idle lookup's scheduled
    # jobs are the ones without a group (migration 23). A retried job of a paused group,
    # due and left pending by the claim that applied its wake-up, was "due now" for the
    # lookup: its worker claimed again at once, then again with a doubling backoff up
    # to poll_max, for as long as the group stayed paused.
    @venturi.task(kind="g_paused_due", group_cap=1)
    async def held(ctx: Context[Any], carry: Item) -> None: ...

    claimer = make_claimer(dsn, held, poll_max=30)
    await held.enqueue(conn, Item(1), group="acme", after=3600)  # as a retry is
    await venturi.set_group(conn, "g_paused_due", "acme", paused=True)
    # Seeded due, rather than waited for: the job and its wake-up an hour earlier.
    await conn.execute(
        "UPDATE venturi.jobs SET visible_at = visible_at - interval '2 hours',"
        " created_at = created_at - interval '2 hours' WHERE kind = 'g_paused_due'"
    )
    await conn.execute(
        "UPDATE venturi.group_wakes SET at = at - interval '2 hours' WHERE kind = 'g_paused_due'"
    )
    claim = await _claim_grouped(conn, 4, kind="g_paused_due")
    assert claim.claimed == []
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 0
    visible = await conn.fetchval(
        "SELECT visible_at <= now() AND visible_at > created_at FROM venturi.jobs"
        " WHERE kind = 'g_paused_due' AND status = 'pending'"
    )
    assert visible  # due, scheduled, pending: what the lookup used to answer
    assert await claimer.until_next_visible(conn) == 30.0
    assert await claimer.until_next_visible(conn) == 30.0  # and no backoff either


async def test_a_due_wake_up_of_a_paused_kind_does_not_wake_the_idle_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # No claim applies a paused kind's wake-ups, so one due stays due; once the kind's
    # claim, finding nothing to do, put it at rest, the idle lookup answered "due now":
    # its worker claimed again at once, then with a doubling backoff up to poll_max, for
    # as long as the kind stayed paused (a probe: 7 claims in 3 s where an idle worker
    # makes one). The resume's notification wakes the worker.
    @venturi.task(kind="g_kind_paused", group_cap=1)
    async def held(ctx: Context[Any], carry: Item) -> None: ...

    claimer = make_claimer(dsn, held, poll_max=30)
    await admin.pause_kinds(conn, ["g_kind_paused"])
    await held.enqueue(conn, Item(1), group="acme")  # its wake-up, due now
    assert (await _claim_grouped(conn, 4, kind="g_kind_paused")).claimed == []
    assert await conn.fetchval("SELECT count(*) FROM venturi.group_wakes") == 1
    claimer.limits.found(claimer.limits.grouped_dry, "g_kind_paused", GROUPED_RECHECK)
    assert await claimer.until_next_visible(conn) == 30.0
    assert await claimer.until_next_visible(conn) == 30.0  # and no backoff either
    await admin.resume_kinds(conn, ["g_kind_paused"])
    assert await claimer.until_next_visible(conn) == 0.0
