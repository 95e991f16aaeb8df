"""Groups (SPEC 13): a job's group, exact per-group caps under racing claimers and
crashes, weighted fair share by virtual time, per-group rates, pause, and the worker
claiming grouped jobs. Claims are driven statement by statement here (the claim itself
is the subject); the last tests run real workers."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import Item, expire_claim, running, wait_for, wait_stat, wait_until
from tests.support.fleet import silence_worker, stop_long_ago
from tests.support.plans import nodes
from venturi import ConfigError, Context, Rate, admin, db, sql
from venturi.backoff import DEFAULT_BACKOFF
from venturi.runtime.worker import Worker

SCHEMA = "venturi"
NO_LIMITS = db.groups.GroupLimits(None, None, None)


async def claim(
    conn: Any,
    kind: str,
    *,
    limit: int = 10,
    cap: int | None = None,
    rate: tuple[float, int] | None = None,
    who: db.Claimant | None = None,
    global_cap: int | None = None,
    done: list[tuple[int, int, str | None]] | None = None,
) -> db.groups.GroupedClaim:
    limits = db.groups.GroupLimits(cap, *(rate or (None, None)))
    result, _ = await db.groups.claim_grouped(
        conn,
        schema=SCHEMA,
        claimant=who or db.Claimant("test"),
        kind=kind,
        lease=60.0,
        floor=0,
        limit=limit,
        limits=limits,
        global_cap=global_cap,
        done=done or [],
    )
    return result


async def claim_all(conn: Any, kind: str, **kw: Any) -> list[asyncpg.Record]:
    """Claim until a claim neither claims nor makes a group ready (groups woken past a
    claim's batch are taken from by the next)."""
    rows: list[asyncpg.Record] = []
    while True:
        got = await claim(conn, kind, **kw)
        rows += got.claimed
        if not got.claimed and not got.woken:
            return rows


async def finish(conn: Any, rows: list[asyncpg.Record]) -> None:
    """Complete claimed jobs (as a worker's settlement does, without the worker)."""
    for r in rows:
        # Test-side write: the settlement under test is the claim's view of it.
        await conn.execute(
            "UPDATE venturi.jobs SET status = 'completed', finished_at = now(), "
            "claim_token = NULL WHERE id = $1",
            r["id"],
        )


async def claimed_per_group(conn: Any, kind: str) -> Counter[str]:
    rows = await conn.fetch(
        "SELECT grp, count(*) AS n FROM venturi.jobs "
        "WHERE status = 'claimed' AND kind = $1 AND grp IS NOT NULL GROUP BY grp",
        kind,
    )
    return Counter({r["grp"]: r["n"] for r in rows})


@pytest.fixture
def grouped(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="grouped", group_cap=2)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


async def test_a_job_keeps_its_group_and_a_bad_group_writes_nothing(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    job_id = await grouped.enqueue(conn, Item(1), group="acme")
    info = await venturi.get_job(conn, job_id)
    assert info is not None and info.group == "acme"
    plain = await venturi.get_job(conn, await grouped.enqueue(conn, Item(2)))
    assert plain is not None and plain.group is None
    ids = await venturi.enqueue_many(conn, [grouped.job(Item(i), group="b") for i in range(3)])
    assert {(await venturi.get_job(conn, i)).group for i in ids} == {"b"}  # type: ignore[union-attr]
    before = await conn.fetchval("SELECT count(*) FROM venturi.jobs")
    for bad in ("", "x" * 201, "a\nb", "tab\there", 7, b"bytes"):
        with pytest.raises(ConfigError, match="group must be a non-empty string"):
            await grouped.enqueue(conn, Item(3), group=bad)  # type: ignore[arg-type]
    # A lone surrogate (a broken decode) has no UTF-8 form: the driver's DataError it
    # was; a key and a kind alike.
    with pytest.raises(ConfigError, match="group must be valid Unicode text"):
        await grouped.enqueue(conn, Item(3), group="a\ud800")
    with pytest.raises(ConfigError, match="key must be a string without NUL"):
        await grouped.enqueue(conn, Item(3), key="k\udfff")
    with pytest.raises(ConfigError, match="kind must be valid Unicode text"):
        venturi.task(kind="k\ud800")(grouped.fn)
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == before


async def test_a_group_an_older_release_named_with_a_line_separator_can_be_resumed(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # Releases before December 2026 took U+2028 in a group's name; refused everywhere,
    # such a group, paused, could not be resumed, shown or listed: its jobs stayed
    # pending. Only a new job's group is refused; an operator names any group.
    legacy = "line\u2028sep"
    job = await grouped.enqueue(conn, Item(1), group="placeholder")
    # Test-side writes: the rows an older release wrote.
    await conn.execute("UPDATE venturi.jobs SET grp = $1 WHERE id = $2", legacy, job)
    await conn.execute(
        "INSERT INTO venturi.groups (kind, grp, paused) VALUES ('grouped', $1, true)", legacy
    )
    state = await admin.show_group(conn, "grouped", legacy)
    assert state is not None and state.paused and state.waiting == "group paused"
    assert [j.id for j in await admin.list_jobs(conn, group=legacy)] == [job]
    await venturi.set_group(conn, "grouped", legacy, paused=False)
    assert [r["id"] for r in await claim_all(conn, "grouped")] == [job]


async def test_a_group_breaking_a_line_is_refused_and_look_alikes_are_kept(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # U+2028 and U+2029 (categories Zl, Zp) break a line as a newline does: every one-line
    # output that names the group (a log line, groups list, the CLI's errors) broke on
    # them, and they were accepted.
    before = await conn.fetchval("SELECT count(*) FROM venturi.jobs")
    for bad in ("a\u2028b", "\u2029", "end\u2029"):
        with pytest.raises(ConfigError, match="group must be a non-empty string") as caught:
            await grouped.enqueue(conn, Item(1), group=bad)
        assert "\n" not in str(caught.value) and "U+2028" in str(caught.value)
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == before
    # Names an operator could take for others stay valid (the operator's reads print
    # them quoted): spaces at an end or only spaces, invisible format characters, and a
    # joiner inside an emoji sequence.
    for good in ("acme ", " acme", " ", "acme\u200b", "\ufeff", "\U0001f468\u200d\U0001f469"):
        job = await venturi.get_job(conn, await grouped.enqueue(conn, Item(2), group=good))
        assert job is not None and job.group == good


async def test_a_spec_built_by_hand_with_a_bad_group_writes_nothing(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # JobSpec is public, and msgspec's replace() builds one without Task.job's checks: a
    # bad group was written (the column has no constraint), ran, and then no operator's
    # command could name it (jobs show, groups set, groups show refused it).
    good = grouped.job(Item(1), group="acme")
    before = await conn.fetchval("SELECT count(*) FROM venturi.jobs")
    for bad in ("", "a\nb", "x" * 201, "\x7f", 5, "a\ud800"):
        spec = msgspec.structs.replace(good, group=bad)
        with pytest.raises(ConfigError, match="group must be"):
            await venturi.enqueue_many(conn, [good, spec])
        flow = venturi.Workflow()
        flow.add("a", good)
        with pytest.raises(ConfigError, match="group must be"):
            flow.add("b", spec)
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs") == before


def test_task_and_set_group_check_their_values(kinds: list[str]) -> None:
    async def h(ctx: Context[Any], carry: Item) -> None:
        return None

    # A group's cap in one wording, declared or set (the task's said ">= 1", set_group's
    # "of at least 1 (or None)").
    for below in (0, -1):
        wording = f"must be an integer >= 1 (or None), got {below}"
        with pytest.raises(ConfigError) as declared:
            venturi.task(kind="g_bad", group_cap=below)(h)
        assert str(declared.value) == f"group_cap {wording}"
        with pytest.raises(ConfigError) as set_:
            asyncio.run(venturi.set_group(None, "g_bad", "g", cap=below))
        assert str(set_.value) == f"cap {wording}"

    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="group_cap"):
            venturi.task(kind="g_bad", group_cap=bad)(h)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="group_rate"):
        venturi.task(kind="g_bad", group_rate=5)(h)  # type: ignore[arg-type]
    fields = venturi.groups._fields
    for bad_cap in (0, -2, 1.0, True):
        with pytest.raises(ConfigError, match="cap must be"):
            fields("k", "g", bad_cap, venturi.groups.UNCHANGED, venturi.groups.UNCHANGED)
    for bad_weight in (0, -1, float("inf"), float("nan"), "3", True):
        with pytest.raises(ConfigError, match="weight must be"):
            fields("k", "g", venturi.groups.UNCHANGED, bad_weight, venturi.groups.UNCHANGED)
    # A weight of 5e-324 was taken, and its 1/weight overflowed every grouped claim of the
    # kind in the database: its other groups' jobs stalled too.
    for bad_weight in (5e-324, 1e-7, 1e7):
        with pytest.raises(ConfigError, match="weight must be from 1e-06 to 1,000,000"):
            fields("k", "g", venturi.groups.UNCHANGED, bad_weight, venturi.groups.UNCHANGED)
    for good in (1e-6, 1e6):
        fields("k", "g", venturi.groups.UNCHANGED, good, venturi.groups.UNCHANGED)
    # An int too large for a float: OverflowError from the check itself, not ConfigError;
    # a rate and a duration alike.
    with pytest.raises(ConfigError, match="weight must be from"):
        fields("k", "g", venturi.groups.UNCHANGED, 10**400, venturi.groups.UNCHANGED)
    with pytest.raises(ConfigError, match="rate per_second must be at most"):
        venturi.Rate(per_second=10**400)
    with pytest.raises(ConfigError, match="lease must be at most 100 years"):
        venturi.task(kind="g_bad", lease=10**400)(h)
    with pytest.raises(ConfigError, match="lease must be positive"):
        venturi.task(kind="g_bad", lease=-(10**400))(h)
    with pytest.raises(ConfigError, match="paused must be"):
        fields("k", "g", venturi.groups.UNCHANGED, venturi.groups.UNCHANGED, "yes")
    with pytest.raises(ConfigError, match="group must be"):
        fields("k", "", venturi.groups.UNCHANGED, venturi.groups.UNCHANGED, None)


async def test_ungrouped_claims_leave_grouped_jobs_alone(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await grouped.enqueue(conn, Item(1), group="acme")
    plain_id = await grouped.enqueue(conn, Item(2))
    answer = await db.claims.job_claim(
        conn,
        schema=SCHEMA,
        claimant=db.Claimant("plain"),
        kinds=["grouped"],
        leases=[60.0],
        floor=0,
        limit=10,
    )
    assert [r["id"] for r in answer.claimed] == [plain_id]
    rows = await claim_all(conn, "grouped", cap=2)
    assert [r["grp"] for r in rows] == ["acme"]


async def test_a_group_at_its_cap_is_skipped_and_the_groups_behind_it_run(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="hot") for i in range(50)])
    await grouped.enqueue(conn, Item(99), group="cold")
    rows = await claim_all(conn, "grouped", cap=2)
    assert Counter(r["grp"] for r in rows) == {"hot": 2, "cold": 1}
    # A group at its cap is not one another claim holds (busy: claim again at once).
    assert (await claim(conn, "grouped", cap=2)).busy == 0
    # One of hot's jobs finishes: exactly one more of hot's is claimed, no more.
    await finish(conn, rows[:1] if rows[0]["grp"] == "hot" else rows[1:2])
    more = await claim_all(conn, "grouped", cap=2)
    assert [r["grp"] for r in more] == ["hot"]
    assert (await claimed_per_group(conn, "grouped"))["hot"] == 2


async def test_racing_claimers_never_pass_a_cap(
    dsn: str, conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    groups = [f"t{i}" for i in range(5)]
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=groups[i % 5]) for i in range(300)]
    )
    cap = 2
    peaks: Counter[str] = Counter()
    finished = 0
    rng = random.Random(7)

    async def claimer(n: int) -> None:
        nonlocal finished
        c = await asyncpg.connect(dsn)
        mine: list[asyncpg.Record] = []
        try:
            for _ in range(400):
                got = await claim(c, "grouped", cap=cap, limit=3, who=db.Claimant(f"c{n}"))
                mine += got.claimed
                counts = await claimed_per_group(c, "grouped")
                for g, k in counts.items():
                    peaks[g] = max(peaks[g], k)
                rng.shuffle(mine)
                done, mine = mine[: rng.randint(0, len(mine))], mine
                mine = [r for r in mine if r not in done]
                await finish(c, done)
                finished += len(done)
                if finished >= 300:
                    break
        finally:
            await finish(c, mine)
            await c.close()

    await asyncio.gather(*(claimer(n) for n in range(6)))
    assert peaks and max(peaks.values()) <= cap, peaks
    assert max(peaks.values()) == cap  # the test raced for real: every slot was used


async def test_claims_in_flight_at_once_take_different_groups(
    dsn: str, conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    """A group another claim holds is passed over and the groups behind it are taken: two
    workers claiming at once share the ready groups (before, the second reached for the
    same first groups, came back empty and claimed again until the first committed). A
    claim that finds fewer groups than it asks for counts the held ones as busy."""
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group=f"t{i}") for i in range(6)])
    while (await claim(conn, "grouped", cap=2, limit=0)).woken:
        pass
    other = await asyncpg.connect(dsn)
    try:
        async with other.transaction():
            first = await claim(other, "grouped", cap=2, limit=3, who=db.Claimant("first"))
            second = await claim(conn, "grouped", cap=2, limit=3)
            third = await claim(conn, "grouped", cap=2, limit=3)
    finally:
        await other.close()
    held = {r["grp"] for r in first.claimed}
    taken = {r["grp"] for r in second.claimed}
    assert len(held) == 3 and len(taken) == 3 and held.isdisjoint(taken)
    assert (second.busy, third.claimed, third.busy) == (0, [], 3)
    assert await claim_all(conn, "grouped", cap=2) == []


async def test_a_crashed_claim_holds_its_slot_until_recovered_and_frees_it_once(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="solo") for i in range(5)])
    await venturi.set_group(conn, "grouped", "solo", cap=1)
    dead_worker = db.Claimant("dead")
    (first,) = await claim_all(conn, "grouped", cap=2, who=dead_worker)
    # The worker died: its claim holds the slot until its lease is recovered.
    assert await claim_all(conn, "grouped", cap=2) == []
    await expire_claim(conn, first["id"])
    recovered = await db.claims.job_recover_stale(
        conn, schema=SCHEMA, recoverer="test", backoff=DEFAULT_BACKOFF
    )
    assert [r["id"] for r in recovered] == [first["id"]]
    # Recovery backs the job off; another of the group takes the freed slot.
    (second,) = await claim_all(conn, "grouped", cap=2)
    assert second["id"] != first["id"]
    # The dead worker's late completion frees nothing: the ownership guard refuses it.
    late = await db.claims.job_claim(
        conn,
        schema=SCHEMA,
        claimant=dead_worker,
        kinds=["grouped"],
        leases=[60.0],
        floor=0,
        limit=0,
        done=[(first["id"], first["attempt"], None)],
    )
    assert late.settled == set()
    assert await claim_all(conn, "grouped", cap=2) == []
    assert (await claimed_per_group(conn, "grouped"))["solo"] == 1


async def test_weights_share_the_claims_three_to_one(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn,
        [grouped.job(Item(i), group="paying") for i in range(200)]
        + [grouped.job(Item(i), group="free") for i in range(200)],
    )
    await venturi.set_group(conn, "grouped", "paying", weight=3)
    taken: Counter[str] = Counter()
    while sum(taken.values()) < 200:
        got = await claim(conn, "grouped", limit=4)
        taken.update(r["grp"] for r in got.claimed)
        await finish(conn, got.claimed)
    assert 145 <= taken["paying"] <= 155, taken  # 3:1 of 200 is 150


@pytest.mark.parametrize("known", [False, True], ids=["first-seen", "known"])
async def test_an_idle_group_restarts_at_the_least_virtual_time(
    conn: asyncpg.Connection, grouped: venturi.Task[Item], known: bool
) -> None:
    if known:  # "late" ran a job long ago: the claim that wakes it takes from it
        await grouped.enqueue(conn, Item(-1), group="late")
        await finish(conn, await claim_all(conn, "grouped", limit=1))
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="busy") for i in range(100)])
    got = await claim(conn, "grouped", limit=1)
    for _ in range(40):
        got = await claim(conn, "grouped", limit=1)
        await finish(conn, got.claimed)
    # A group that was idle all along banks no credit: it gets its turn, then alternates.
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="late") for i in range(20)])
    order: list[str] = []
    while len(order) < 10:
        got = await claim(conn, "grouped", limit=1)
        order += [r["grp"] for r in got.claimed]
        await finish(conn, got.claimed)
    assert Counter(order[2:]) == {"busy": 4, "late": 4}, order


async def test_a_paused_group_is_skipped_until_resumed(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=g) for i in range(3) for g in ("a", "b")]
    )
    settings = await venturi.set_group(conn, "grouped", "a", paused=True)
    assert settings.paused and settings.cap is None
    rows = await claim_all(conn, "grouped")
    assert {r["grp"] for r in rows} == {"b"}
    await venturi.set_group(conn, "grouped", "a", paused=False)
    rows = await claim_all(conn, "grouped")
    assert [r["grp"] for r in rows] == ["a"] * 3


async def test_a_resumed_groups_high_job_is_claimed_ahead_of_the_other_groups(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # A HIGH job enqueued while its group was paused: the resume's wake-up gives the
    # group its tier. At the default tier it waited behind every other group's NORMAL
    # jobs (here, its virtual time the greatest) until its group's first claim.
    await venturi.set_group(conn, "grouped", "P", paused=True)
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group=f"n{i}") for i in range(3)])
    high = await grouped.enqueue(conn, Item(9), group="P", priority=venturi.Priority.HIGH)
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group=f"n{i}") for i in range(3)])
    await claim(conn, "grouped", limit=0)  # the wake-ups applied, P's while paused
    # Test-side write: P behind the others in its tier.
    await conn.execute("UPDATE venturi.groups SET vtime = 100 WHERE grp = 'P'")
    await venturi.set_group(conn, "grouped", "P", paused=False)
    # The other groups' new jobs wake them beside P: the claim ranks the waking groups
    # by tier, then virtual time.
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group=f"n{i}") for i in range(3)])
    got = await claim(conn, "grouped", limit=1)
    assert [r["id"] for r in got.claimed] == [high]


async def test_a_group_held_at_its_cap_by_a_gone_worker_says_who_frees_it(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # A killed worker's claim holds its group's slot until its lease ends (15 minutes by
    # default): "group at its cap" looked like a busy group, and `venturi recover` (the
    # expired leases only) freed nothing. The reason names each holder and the command;
    # with two, it named the first alone ("frees them"), which freed one claim of two.
    holders = [db.Claimant(f"crashed-{i}") for i in range(2)]
    for me in holders:
        await db.workers.worker_register(
            conn,
            schema=SCHEMA,
            id=me.token,
            name=me.name,
            host="h",
            pid=1,
            kinds=["grouped"],
            concurrency=4,
            version=venturi.__version__,
        )
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="acme") for i in range(2)])
    held = [(await claim(conn, "grouped", cap=2, limit=1, who=me)).claimed[0] for me in holders]
    waiting = await grouped.enqueue(conn, Item(2), group="acme")
    shown = await admin.show_job(conn, waiting)
    assert shown is not None and shown.group_waits == "group at its cap"  # live holders
    await silence_worker(conn, holders[0].token, 3600)
    first = str(holders[0].token)[:8]
    shown = await admin.show_job(conn, waiting)
    assert shown is not None and shown.group_waits == (
        f"group at its cap; 1 of its claims is held by worker {first}, no longer running "
        f"(venturi recover --worker {first} frees it)"
    ), shown
    await stop_long_ago(conn, holders[1].token, 60)
    second = str(holders[1].token)[:8]
    shown = await admin.show_job(conn, waiting)
    assert shown is not None and shown.group_waits == (
        f"group at its cap; 2 of its claims are held by workers {first}, {second}, no longer "
        f"running (venturi recover --worker {first} and venturi recover --worker {second} "
        "free them)"
    ), shown
    state = await admin.show_group(conn, "grouped", "acme")
    assert state is not None and state.waiting == shown.group_waits
    for row in held:
        await expire_claim(conn, row["id"])
    shown = await admin.show_job(conn, waiting)
    assert shown is not None and shown.group_waits == (
        "group at its cap; 2 of its claims are past their leases "
        "(the next stale sweep or venturi recover frees them)"
    ), shown


async def test_a_job_not_yet_due_waits_for_its_time_not_for_its_group(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group="acme") for i in range(2)])
    assert len(await claim_all(conn, "grouped", cap=2)) == 2
    due = await grouped.enqueue(conn, Item(2), group="acme")
    later = await grouped.enqueue(conn, Item(3), group="acme", after=3600)
    shown = await admin.show_job(conn, due)
    assert shown is not None and shown.group_waits == "group at its cap"
    # (It said "group at its cap" too; docs/groups.md: a job that says no reason waits
    # for a free slot or for its time.)
    shown = await admin.show_job(conn, later)
    assert shown is not None and shown.group_waits is None


async def test_a_job_raised_to_a_better_tier_is_claimed_ahead_of_the_other_groups(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    low = venturi.Priority.LOW
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=f"g{i % 100}", priority=low) for i in range(500)]
    )
    # The first claim makes the hundred groups ready and takes one job from five of
    # them, which are then the last in the tier's order (a virtual time of 1, the others
    # 0): without a wake-up, a job of theirs waits for about nineteen claims of five.
    first = (await claim(conn, "grouped", limit=5)).claimed
    await finish(conn, list(first))
    assert await conn.fetchval("SELECT count(*) FROM venturi.groups WHERE ready") == 100
    raised = await conn.fetchval(
        "SELECT max(id) FROM venturi.jobs WHERE grp = $1 AND status = 'pending'",
        first[0]["grp"],
    )
    [change] = await admin.set_priority(conn, [raised], "high")
    assert change.done
    got = (await claim(conn, "grouped", limit=5)).claimed
    assert raised in [r["id"] for r in got]
    assert [r["priority"] for r in got].count(0) == 1
    # Its group then returns to the tier of its next job.
    head = await conn.fetchval("SELECT head FROM venturi.groups WHERE grp = $1", first[0]["grp"])
    assert head == int(low)


async def test_a_deep_page_of_the_groups_list_costs_what_the_groups_cost(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # 1,000 groups, each with a job claimed and one pending: every group is among the
    # most pending and among those with claimed jobs.
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=f"g{i % 1000:04}") for i in range(2000)]
    )
    assert len(await claim_all(conn, "grouped", cap=1, limit=100)) == 1000
    page = await admin.list_groups(conn, "grouped", limit=50, offset=800)
    assert [(g.group, g.pending, g.claimed) for g in page] == [
        (f"g{i:04}", 1, 1) for i in range(800, 850)
    ]
    # The rows the plan's nodes pass, every loop counted, stay within a few times the
    # rows of the tables it reads (3,000): a look-up of the counts per group on the page
    # and before it cost the page's depth squared (800,000 rows here; --offset 50,000 at
    # 100,000 groups took minutes). Analyzed first, as autovacuum keeps a live queue.
    await conn.execute(sql.statement("maintenance/analyze", SCHEMA))
    plan = await conn.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.statement("group_list", SCHEMA).rstrip("; \n"),
        "grouped",
        None,
        50,
        800,
    )
    # (EXPLAIN gives each node's rows, and the rows its filters removed, per loop.)
    read = [
        (
            n["Actual Rows"]
            + n.get("Rows Removed by Filter", 0)
            + n.get("Rows Removed by Join Filter", 0)
        )
        * n["Actual Loops"]
        for n in nodes(json.loads(plan))
        if "Actual Loops" in n
    ]
    assert sum(read) <= 10 * 3000, sum(read)


async def test_a_group_rate_spends_that_groups_tokens_only(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=g) for i in range(10) for g in ("a", "b")]
    )
    rows = await claim_all(conn, "grouped", rate=(0.001, 3))
    assert Counter(r["grp"] for r in rows) == {"a": 3, "b": 3}
    # Out of tokens: parked, with a wake-up for its next token.
    wake = await conn.fetchval(
        "SELECT min(at) - now() FROM venturi.group_wakes WHERE kind = 'grouped'"
    )
    assert wake is not None and wake.total_seconds() > 100
    shown = await admin.show_group(conn, "grouped", "a")
    assert shown is not None and shown.waiting == "group out of tokens"
    # Test-side write: the thousand seconds to its next token passed with no claim (no
    # worker of the kind). It said "out of tokens" still, from the level at the last
    # claim; the bucket holds a token now, and the next claim takes a job.
    await conn.execute(
        "UPDATE venturi.groups SET refilled_at = refilled_at - interval '2000 s', "
        "token_at = token_at - interval '2000 s' WHERE kind = 'grouped'"
    )
    shown = await admin.show_group(conn, "grouped", "a")
    assert shown is not None and shown.waiting is None


async def test_a_job_refused_by_the_global_cap_takes_no_group_slot(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=g) for i in range(4) for g in ("a", "b", "c")]
    )
    rows = await claim_all(conn, "grouped", cap=2, global_cap=2)
    assert len(rows) == 2
    # The groups the global cap refused keep their slots and their place.
    per = await claimed_per_group(conn, "grouped")
    assert sum(per.values()) == 2
    claims = dict(await conn.fetch("SELECT grp, claims FROM venturi.groups"))
    assert sum(claims.values()) == 2


async def test_completions_riding_a_grouped_claim_free_their_places_under_the_global_cap(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    await venturi.enqueue_many(
        conn, [grouped.job(Item(i), group=g) for i in range(3) for g in ("a", "b")]
    )
    me = db.Claimant("test")  # the completions' ownership token is their claim's
    first = await claim(conn, "grouped", cap=3, global_cap=2, who=me)
    assert (len(first.claimed), first.held) == (2, 2)
    done: list[tuple[int, int, str | None]] = [(r["id"], r["attempt"], None) for r in first.claimed]
    second = await claim(conn, "grouped", cap=3, global_cap=2, who=me, done=done)
    assert second.settled == {r["id"] for r in first.claimed}
    # The two it completes are no longer claimed once it commits: their places are this
    # claim's (counted as claimed, they left it no room, and its worker, told the kind
    # was at its cap, left the kind alone for half a second on every such claim).
    assert (len(second.claimed), second.held) == (2, 2)
    assert sum((await claimed_per_group(conn, "grouped")).values()) == 2


async def test_a_worker_drains_groups_within_their_caps(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    active: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    done = 0

    @venturi.task(kind="g_work", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        nonlocal done
        group = f"g{carry.n % 4}"
        active[group] += 1
        peak[group] = max(peak[group], active[group])
        try:
            await asyncio.sleep(0.01)  # stays: long enough for the slots to contend
        finally:
            active[group] -= 1
            done += 1

    await venturi.enqueue_many(conn, [handler.job(Item(i), group=f"g{i % 4}") for i in range(40)])
    workers = [
        Worker(None, dsn, [handler], concurrency=4, poll_max=0.5, claimed_by=f"w{i}")
        for i in range(2)
    ]
    async with running(workers[0]), running(workers[1]):
        await wait_until(lambda: done == 40, within=60)
    assert set(peak.values()) == {1}, peak
    assert await conn.fetchval("SELECT count(*) FROM venturi.jobs WHERE status <> 'completed'") == 0


async def test_a_worker_finds_groups_of_a_kind_that_declares_no_group_limit(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    seen: list[str] = []

    @venturi.task(kind="g_plain", rate=Rate(per_second=1000, burst=1000))
    async def handler(ctx: Context[Any], carry: Item) -> None:
        seen.append(str(carry.n))

    worker = Worker(None, dsn, [handler], concurrency=2, poll_max=0.5)
    async with running(worker):
        await handler.enqueue(conn, Item(1), group="acme")
        await handler.enqueue(conn, Item(2))
        await wait_until(lambda: len(seen) == 2, within=30)
    assert sorted(seen) == ["1", "2"]


@pytest.mark.parametrize("when", ["before the worker starts", "while it is busy"])
async def test_a_busy_worker_finds_groups_of_a_kind_that_declares_no_group_limit(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], when: str
) -> None:
    # A backlog keeps every slot busy, so the loop never idles, which is where it used to
    # learn that a kind has groups: the grouped job waited for the whole backlog (400
    # runs of 50 ms on 2 slots, 10 s). A busy worker now asks at most once a second.
    done: list[int] = []
    grouped_ran_after: list[int] = []

    @venturi.task(kind="g_busy")
    async def handler(ctx: Context[Any], carry: Item) -> None:
        if carry.n < 0:
            grouped_ran_after.append(len(done))
            return
        await asyncio.sleep(0.05)  # stays: the backlog keeps every slot busy a while
        done.append(carry.n)

    await venturi.enqueue_many(conn, [handler.job(Item(i)) for i in range(400)])
    if when == "before the worker starts":
        await handler.enqueue(conn, Item(-1), group="acme")
    worker = Worker(None, dsn, [handler], concurrency=2, poll_max=30)
    async with running(worker):
        if when == "while it is busy":
            await wait_until(lambda: len(done) >= 2, within=30)
            await handler.enqueue(conn, Item(-1), group="acme")
        await wait_until(lambda: bool(grouped_ran_after), within=60)
    assert grouped_ran_after[0] < 200, grouped_ran_after


async def test_an_idle_worker_takes_a_resumed_groups_job_at_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # An idle worker polls every 60 s: only set_group's notification can wake it within
    # the wait (it slept through a resume until poll_max before).
    ran = asyncio.Event()

    @venturi.task(kind="g_resume", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        ran.set()

    await venturi.set_group(conn, "g_resume", "acme", paused=True)
    await handler.enqueue(conn, Item(1), group="acme")
    worker = Worker(None, dsn, [handler], concurrency=2, poll_max=60)
    async with running(worker):
        await wait_until(lambda: worker.listening)
        await wait_stat(worker, "empty_claims", 1)
        assert not ran.is_set()
        await venturi.set_group(conn, "g_resume", "acme", paused=False)
        await asyncio.wait_for(ran.wait(), 20)


async def test_an_idle_worker_fills_a_raised_cap_at_once(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # The group's one slot is taken by a job that waits; the worker then finds the group
    # at its cap and idles. Raising the cap must wake it (poll_max is 60 s).
    second = asyncio.Event()
    gate = asyncio.Event()
    empty_then: list[int] = []

    @venturi.task(kind="g_raise", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        if carry.n == 1:
            empty_then.append(worker.stats["empty_claims"])
            await gate.wait()
        else:
            second.set()

    await handler.enqueue(conn, Item(1), group="acme")
    await handler.enqueue(conn, Item(2), group="acme")
    worker = Worker(None, dsn, [handler], concurrency=2, poll_max=60)
    async with running(worker):
        await wait_until(lambda: worker.listening and bool(empty_then))
        # A claim after the first job started found the group at its cap.
        await wait_stat(worker, "empty_claims", empty_then[0] + 1)
        assert not second.is_set()
        await venturi.set_group(conn, "g_raise", "acme", cap=2)
        try:
            await asyncio.wait_for(second.wait(), 20)
        finally:
            gate.set()


async def test_a_child_takes_its_parents_group_and_a_workflow_node_its_own(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="g_child", result=int)
    async def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="g_parent", result=int)
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        inherited = await ctx.spawn("same", child, Item(1))
        other = await ctx.spawn("other", child, Item(2), group="elsewhere")
        return venturi.complete(sum(await ctx.gather(inherited, other)))

    parent_id = await parent.enqueue(conn, Item(0), group="acme")
    wf = venturi.Workflow()
    wf.add("node", child.job(Item(3), group="wf-group"))
    node_ids = await wf.enqueue(conn)
    worker = Worker(None, dsn, [parent, child], concurrency=4, poll_max=0.5)
    async with running(worker):

        async def done() -> bool:
            job = await venturi.get_job(conn, parent_id)
            return job is not None and job.status == "completed"

        await wait_for(done, within=60)
    rows = await conn.fetch(
        "SELECT grp FROM venturi.jobs WHERE parent_id = $1 ORDER BY id", parent_id
    )
    assert [r["grp"] for r in rows] == ["acme", "elsewhere"]
    node = await venturi.get_job(conn, node_ids["node"])
    assert node is not None and node.group == "wf-group"


async def test_a_waiting_parent_holds_no_slot_of_its_group(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Cap 1: a parent that waits for its children (of its kind and group, inherited) must
    # not hold the group's one slot while it waits, or they could never run (SPEC 13:
    # waiting jobs hold no slot). Three children, one at a time, then the parent resumes.
    running_now: list[int] = []
    peak = 0

    @venturi.task(kind="g_wait", group_cap=1, result=int)
    async def handler(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        nonlocal peak
        running_now.append(carry.n)
        peak = max(peak, len(running_now))
        try:
            if carry.n == 0:
                kids = [await ctx.spawn(f"c{i}", handler, Item(i)) for i in (1, 2, 3)]
                return venturi.complete(sum(await ctx.gather(*kids)))
            await asyncio.sleep(0)  # stays: a yield, where a second run would interleave
            return venturi.complete(carry.n)
        finally:
            running_now.remove(carry.n)

    parent_id = await handler.enqueue(conn, Item(0), group="acme")
    worker = Worker(None, dsn, [handler], concurrency=4, poll_max=0.5)
    async with running(worker):

        async def done() -> bool:
            job = await venturi.get_job(conn, parent_id)
            return job is not None and job.status == "completed"

        await wait_for(done, within=60)
    job = await venturi.get_job(conn, parent_id)
    assert job is not None and job.result == 6
    assert peak == 1


async def test_a_grouped_job_is_not_starved_by_an_ungrouped_backlog(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    done: list[int] = []
    grouped_ran_after: list[int] = []

    @venturi.task(kind="g_backlog")
    async def backlog(ctx: Context[Any], carry: Item) -> None:
        await asyncio.sleep(0.02)  # stays: the backlog keeps every slot busy a while
        done.append(carry.n)

    @venturi.task(kind="g_tenant", group_cap=1)
    async def tenant(ctx: Context[Any], carry: Item) -> None:
        grouped_ran_after.append(len(done))

    await venturi.enqueue_many(
        conn, [backlog.job(Item(i), priority=venturi.Priority.LOW) for i in range(200)]
    )
    await tenant.enqueue(conn, Item(0), group="acme", priority=venturi.Priority.HIGH)
    worker = Worker(None, dsn, [backlog, tenant], concurrency=2, poll_max=0.5)
    async with running(worker):
        await wait_until(lambda: len(done) == 200 and bool(grouped_ran_after), within=60)
    # A HIGH job of a group at none of its limits, behind 200 LOW ones of another kind:
    # it must not wait for the backlog (found by the chaos soak: it ran after all 200
    # when the loop gave the groups' claim only the slots the ordinary claim left).
    assert grouped_ran_after[0] < 100, grouped_ran_after


async def test_a_paused_kind_claims_no_grouped_job_until_resumed(
    conn: asyncpg.Connection, grouped: venturi.Task[Item]
) -> None:
    # `venturi kinds pause` leaves the kind out of every claim: the grouped claim too,
    # which still settles the completions riding it.
    from venturi import admin

    me = db.Claimant("test")  # the completion's ownership token is its claim's
    first = await grouped.enqueue(conn, Item(1), group="acme")
    rows = await claim_all(conn, "grouped", cap=2, who=me)
    assert [r["id"] for r in rows] == [first]
    # A group made ready, its job not yet claimed, when the pause comes.
    await grouped.enqueue(conn, Item(3), group="ready")
    assert (await claim(conn, "grouped", cap=2, limit=0)).woken == 1
    await admin.pause_kinds(conn, ["grouped"], reason="test")
    await venturi.enqueue_many(conn, [grouped.job(Item(2), group=g) for g in ("acme", "new")])
    paused = await claim(conn, "grouped", cap=2, who=me, done=[(first, rows[0]["attempt"], None)])
    # Nor is the ready group counted as held by another claim (busy): the worker would
    # claim again at once, for as long as the pause lasts.
    assert (paused.claimed, paused.woken, paused.parked, paused.busy) == ([], 0, 0, 0)
    assert paused.settled == {first}
    assert await claim_all(conn, "grouped", cap=2) == []
    await admin.resume_kinds(conn, ["grouped"])
    got = sorted(r["grp"] for r in await claim_all(conn, "grouped", cap=2))
    assert got == ["acme", "new", "ready"]


@pytest.mark.parametrize("handler_is", ["async", "sync"])
async def test_a_run_past_its_timeout_frees_its_group_slot_when_its_job_settles(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], handler_is: str
) -> None:
    # docs/groups.md, "A slot is a claim, not a thread": an async handler past its
    # timeout is cancelled and its job settles once it has ended (its slow cleanup
    # included), so cap 1 holds for its code too; a def handler cannot be stopped, its
    # job settles at the timeout, and the group's next job runs beside its thread.
    lock = threading.Lock()
    now: list[int] = []
    peak, ended = 0, threading.Semaphore(0)

    def entered(n: int) -> None:
        nonlocal peak
        with lock:
            now.append(n)
            peak = max(peak, len(now))

    def left(n: int) -> None:
        with lock:
            now.remove(n)
        ended.release()

    @venturi.task(kind="g_async_late", group_cap=1, timeout=0.2, max_failures=1)
    async def late_async(ctx: Context[Any], carry: Item) -> None:
        entered(carry.n)
        try:
            await asyncio.sleep(30)  # stays: cut short by the timeout
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # stays: a cleanup slower than the timeout
            raise
        finally:
            left(carry.n)

    @venturi.task(kind="g_sync_late", group_cap=1, timeout=0.2, max_failures=1)
    def late_sync(ctx: Context[Any], carry: Item) -> None:
        entered(carry.n)
        time.sleep(0.8)  # stays: past the timeout, in a thread nothing can stop
        left(carry.n)

    task = late_async if handler_is == "async" else late_sync
    await venturi.enqueue_many(conn, [task.job(Item(n), group="acme") for n in (1, 2)])
    async with running(Worker(None, dsn, [task], concurrency=4, poll_max=0.5)):
        for _ in (1, 2):
            assert await asyncio.to_thread(ended.acquire, True, 30)
    assert peak == (1 if handler_is == "async" else 2)
