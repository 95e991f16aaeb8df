"""SPEC 13: "Jobs without a group share one group of their own." A kind's jobs without a
group get one group's share of its claims beside its groups with work (weight 1 against
the groups' summed weights), keep their tier, and take every slot the groups leave."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item, running, wait_until
from venturi import Context, db
from venturi.runtime.worker import Worker

GROUPS = 9


async def run_order(
    dsn: str, conn: asyncpg.Connection, plain: int, per_group: int, workers: int, **task: Any
) -> list[str | None]:
    """Run ``plain`` jobs without a group and ``per_group`` jobs in each of GROUPS groups
    of one kind, all enqueued before ``workers`` workers of four slots in all start; the
    group of each job started, in order (None: without a group)."""
    order: list[str | None] = []

    @venturi.task(kind="s_share", **task)
    async def work(ctx: Context[Any], carry: Item) -> None:
        order.append(ctx.job.group)
        await asyncio.sleep(0.002)  # stays: the backlog lasts past the worker's first looks

    jobs = [work.job(Item(i)) for i in range(plain)]
    jobs += [work.job(Item(i), group=f"t{i % GROUPS}") for i in range(per_group * GROUPS)]
    await venturi.enqueue_many(conn, jobs)
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(workers):
            worker = Worker(None, dsn, [work], concurrency=4 // workers, poll_max=30)
            await stack.enter_async_context(running(worker))
        await wait_until(lambda: len(order) == len(jobs), within=90)
    return order


@pytest.mark.parametrize(
    ("workers", "limits"),
    [
        (1, {}),
        (2, {}),
        (1, {"global_cap": 8}),
        (1, {"rate": venturi.Rate(per_second=100_000, burst=1_000, shared=True)}),
    ],
    ids=["one worker", "two workers", "global cap", "shared rate"],
)
async def test_jobs_without_a_group_get_one_groups_share(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], workers: int, limits: dict[str, Any]
) -> None:
    # Each worker keeps the share over its own claims, so two keep it too; a kind with a
    # global cap or a shared rate, whose jobs without a group a claim of their own takes
    # (fill_capped, fill_shared), keeps it as well.
    order = await run_order(dsn, conn, 600, 200, workers, group_cap=100, **limits)
    # While both are backlogged (runs 300 to 1,500, past the workers' first looks): one
    # share in ten. Taking turns with the groups, they got half.
    window = order[300:1500]
    plain = window.count(None) / len(window)
    assert 0.05 <= plain <= 0.2, plain
    # Work-conserving: once the groups have drained, the rest run.
    assert order.count(None) == 600


async def test_jobs_without_a_group_take_the_slots_the_groups_leave(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    release = asyncio.Event()
    holding: set[str] = set()
    plain_done = 0

    @venturi.task(kind="s_capped", group_cap=1)
    async def work(ctx: Context[Any], carry: Item) -> None:
        nonlocal plain_done
        if ctx.job.group is None:
            plain_done += 1
            return
        holding.add(ctx.job.group)
        await release.wait()

    grouped = [work.job(Item(i), group=f"t{i % 3}") for i in range(30)]
    await venturi.enqueue_many(conn, grouped + [work.job(Item(i)) for i in range(300)])
    worker = Worker(None, dsn, [work], concurrency=8, poll_max=30)
    async with running(worker):
        # Three groups at their cap of 1 hold three slots; the jobs without a group run
        # through the other five, whatever share they are owed, while the groups wait.
        await wait_until(lambda: len(holding) == 3 and plain_done == 300, within=30)
        release.set()
        await wait_until(lambda: worker.stats["claimed"] == 330, within=30)


async def test_urgent_jobs_without_a_group_are_not_held_to_the_share(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    order: list[tuple[str | None, int]] = []

    @venturi.task(kind="s_urgent", group_cap=100)
    async def work(ctx: Context[Any], carry: Item) -> None:
        order.append((ctx.job.group, carry.n))
        await asyncio.sleep(0.002)  # stays: the backlog lasts past the worker's first looks

    normal = [work.job(Item(0)) for _ in range(300)]
    grouped = [work.job(Item(0), group=f"t{i % GROUPS}") for i in range(300 * GROUPS)]
    await venturi.enqueue_many(conn, normal + grouped)
    worker = Worker(None, dsn, [work], concurrency=4, poll_max=30)
    async with running(worker):
        # Held to their share once the worker has read the groups' weights.
        await wait_until(lambda: len(order) >= 400, within=60)
        at = len(order)
        high = [work.job(Item(1), priority=venturi.Priority.HIGH) for _ in range(100)]
        await venturi.enqueue_many(conn, high)
        await wait_until(lambda: order.count((None, 1)) == 100, within=60)
        last = max(i for i, run in enumerate(order) if run == (None, 1))
        await wait_until(lambda: len(order) >= last + 801, within=60)
    # Their tier is better than the groups': the first is found by the claim that lets
    # the held-back jobs in (once a second), and the rest go first (about 200 runs
    # here), not at one share in ten (about 1,000).
    assert last - at < 500, last - at
    # Nor do they spend the share of the tier below: the jobs without a group of the
    # groups' tier keep about their one in ten right after (held back for 900 of the
    # groups' runs, had the 100 been counted against it).
    after = order[last + 1 : last + 801]
    # 50 and 52 of 800 in two runs here (their share is 80, less what they owed when
    # the urgent jobs came); 8 in two runs had the 100 been counted.
    assert after.count((None, 0)) >= 30, after.count((None, 0))


async def test_urgency_ends_with_the_urgent_jobs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    order: list[tuple[str, str | None, int]] = []

    @venturi.task(kind="s_tenant", group_cap=100)
    async def tenant(ctx: Context[Any], carry: Item) -> None:
        order.append((ctx.job.kind, ctx.job.group, carry.n))
        await asyncio.sleep(0.002)  # stays: the backlog lasts past the worker's first looks

    @venturi.task(kind="s_other")
    async def other(ctx: Context[Any], carry: Item) -> None:
        order.append((ctx.job.kind, None, carry.n))
        await asyncio.sleep(0.002)  # stays: a backlog of another kind

    jobs = [tenant.job(Item(0)) for _ in range(40)]
    jobs += [tenant.job(Item(0), group=f"t{i % GROUPS}") for i in range(200 * GROUPS)]
    jobs += [other.job(Item(0)) for _ in range(2000)]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [tenant, other], concurrency=4, poll_max=30)
    async with running(worker):
        await wait_until(lambda: len(order) >= 400, within=60)
        urgent = [tenant.job(Item(1), priority=venturi.Priority.HIGH) for _ in range(20)]
        await venturi.enqueue_many(conn, urgent)
        await wait_until(lambda: len(order) >= 1400, within=60)
    last = max(i for i, run in enumerate(order) if run[2] == 1)
    after = order[last + 1 : last + 401]
    # Once the urgent jobs without a group have run, the groups take turns with the
    # other kind's backlog again: had the tenant's jobs without a group stayed urgent
    # (their ordinary claim going first), the other kind's 2,000 would have taken
    # every slot until they were done.
    grouped = sum(1 for _, group, _ in after if group is not None)
    assert grouped >= 100, (grouped, last)


async def test_no_credit_banked_while_another_kinds_backlog_fills_the_claims(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    order: list[tuple[str, str | None, int]] = []

    @venturi.task(kind="s_banked", group_cap=100)
    async def tenant(ctx: Context[Any], carry: Item) -> None:
        order.append((ctx.job.kind, ctx.job.group, carry.n))
        await asyncio.sleep(0.002)  # stays: the backlog lasts past the worker's first looks

    @venturi.task(kind="s_low")
    async def other(ctx: Context[Any], carry: Item) -> None:
        order.append((ctx.job.kind, None, carry.n))
        await asyncio.sleep(0.002)  # stays: a backlog of another kind

    # A few jobs without a group first, so that the worker has read the groups' weights;
    # once they are done, the other kind's backlog keeps every ordinary claim full, and
    # nothing tells the worker that the tenant's jobs without a group have none.
    jobs = [tenant.job(Item(0)) for _ in range(50)]
    jobs += [tenant.job(Item(0), group=f"t{i % GROUPS}") for i in range(400 * GROUPS)]
    jobs += [other.job(Item(0), priority=venturi.Priority.LOW) for _ in range(6000)]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [tenant, other], concurrency=4, poll_max=30)
    async with running(worker):
        await wait_until(lambda: len(order) >= 2000, within=60)
        at = len(order)
        await venturi.enqueue_many(conn, [tenant.job(Item(1)) for _ in range(300)])
        await wait_until(lambda: len(order) >= at + 1000, within=60)
    after = [run for run in order[at:] if run[0] == "s_banked"][:300]
    # Their share is one in ten (30), and one fill of the worker's slots more at most:
    # 36 in two runs here; 104 and 106 when the groups' claims of the 2,000 runs before
    # had been counted as owed to them all along.
    plain = sum(1 for run in after if run[2] == 1)
    assert plain <= 45, plain


@pytest.mark.parametrize(
    "limits",
    [{}, {"global_cap": 8}, {"rate": venturi.Rate(per_second=100_000, burst=1_000, shared=True)}],
    ids=["no other limit", "global cap", "shared rate"],
)
async def test_another_kind_keeps_its_turns_while_jobs_without_a_group_are_held_back(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], limits: dict[str, Any]
) -> None:
    # A kind with a global cap or a shared rate has claims of its own (fill_capped,
    # fill_shared), which leave its held-back jobs without a group out as well.
    order: list[str] = []

    @venturi.task(kind="s_held", group_cap=100, **limits)
    async def tenant(ctx: Context[Any], carry: Item) -> None:
        order.append(ctx.job.kind if ctx.job.group is None else "grouped")
        await asyncio.sleep(0.002)  # stays: the backlogs last past the worker's first looks

    @venturi.task(kind="s_beside")
    async def other(ctx: Context[Any], carry: Item) -> None:
        order.append(ctx.job.kind)
        await asyncio.sleep(0.002)  # stays: a backlog of another kind

    jobs = [tenant.job(Item(0)) for _ in range(300)]
    jobs += [tenant.job(Item(0), group=f"t{i % GROUPS}") for i in range(300 * GROUPS)]
    jobs += [other.job(Item(0)) for _ in range(1500)]
    await venturi.enqueue_many(conn, jobs)
    async with running(Worker(None, dsn, [tenant, other], concurrency=4, poll_max=30)):
        await wait_until(lambda: len(order) >= 2500, within=60)
    window = order[500:2500]
    # The other kind's claim and the groups' take turns (about half each), and the
    # tenant's jobs without a group get their one share in ten of the tenant's runs.
    # While the groups' claim went first whenever those were held back, it took every
    # slot, and the other kind ran 0 times in 2,000 (890 now).
    assert window.count("s_beside") >= 600, window.count("s_beside")
    tenant_runs = len(window) - window.count("s_beside")
    assert 0.05 <= window.count("s_held") / tenant_runs <= 0.2, window.count("s_held")


async def test_completions_ride_the_groups_claim_while_jobs_without_a_group_are_held_back(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker of one grouped kind whose jobs without a group are held back has no other
    # claim to take turns with: the groups' claim goes first, carrying the completions.
    separate = 0
    complete = db.settle.job_complete_many_if_owned

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal separate
        separate += 1
        return await complete(*args, **kwargs)

    monkeypatch.setattr(db.settle, "job_complete_many_if_owned", counted)
    order = await run_order(dsn, conn, 600, 200, 1, group_cap=100)
    assert order.count(None) == 600
    # 0 in three runs here; 249 when the ordinary claim took its turn with nothing to
    # claim and the completions went in a statement of their own.
    assert separate < 50, separate


async def tier_order(
    dsn: str,
    conn: asyncpg.Connection,
    plain: int,
    plain_tier: venturi.Priority,
    grouped: int,
    grouped_tier: venturi.Priority,
    groups: int = GROUPS,
    concurrency: int = 4,
) -> list[str | None]:
    """Run ``plain`` jobs without a group of one tier and ``grouped`` jobs over ``groups``
    groups of another, all enqueued before one worker of ``concurrency`` slots starts; the
    group of each job started, in order (None: without a group)."""
    order: list[str | None] = []

    @venturi.task(kind="s_tiers", group_cap=100)
    async def work(ctx: Context[Any], carry: Item) -> None:
        order.append(ctx.job.group)
        await asyncio.sleep(0.002)  # stays: the backlogs last past the worker's first looks

    jobs = [work.job(Item(i), priority=plain_tier) for i in range(plain)]
    jobs += [
        work.job(Item(i), group=f"t{i % groups}", priority=grouped_tier) for i in range(grouped)
    ]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [work], concurrency=concurrency, poll_max=30)
    async with running(worker):
        await wait_until(lambda: len(order) == len(jobs), within=90)
    return order


async def test_groups_of_a_lower_tier_get_the_reserved_claims_beside_urgent_jobs(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Jobs without a group of a better tier than the groups' go first (they spend no
    # share), but priority_ratio's reserved claims are the lower tier's, as they are
    # without groups: the groups' NORMAL jobs waited for all 600 HIGH ones.
    order = await tier_order(
        dsn, conn, 600, venturi.Priority.HIGH, 60 * GROUPS, venturi.Priority.NORMAL
    )
    window = order[50:450]  # past the first looks, while both are backlogged
    grouped = sum(1 for g in window if g is not None) / len(window)
    # About one in four (priority_ratio 4); none at all before.
    assert 0.1 <= grouped <= 0.4, grouped


async def test_jobs_without_a_group_of_a_lower_tier_wait_as_a_lower_tier(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Jobs without a group of a worse tier than the groups' are one group of that tier:
    # they get the reserved claims (about one in four), not a group's share of the
    # groups' tier (one in two against one group, taking turns with it). One slot, so that
    # every claim takes one job and the share of jobs is the cadence's share of claims
    # (0.26; the fault gave 0.5): with four it also hangs on how many jobs each claim
    # finds slots for, which a loaded machine moves (a CI run read 0.38).
    order = await tier_order(
        dsn, conn, 300, venturi.Priority.LOW, 600, venturi.Priority.HIGH, groups=1, concurrency=1
    )
    window = order[50:450]
    plain = window.count(None) / len(window)
    assert 0.1 <= plain <= 0.35, plain
    assert order.count(None) == 300


async def test_two_kinds_one_urgent_one_lagging_each_get_the_reserved_claims(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    # Two grouped kinds in one worker: s_up's jobs without a group are of a better tier
    # than its groups', s_down's of a worse one. A reserved claim is the lower tier's in
    # each: s_up's groups and s_down's jobs without a group. A reserved turn of the
    # worker's puts the groups' claim first (for s_up), so s_down's jobs without a group
    # could be left the slots the groups do not take; they are not starved, because the
    # ordinary claim keeps its own reserved cadence for its lower tier (0.13-0.19 of the
    # starts here, as one kind's lagging jobs get).
    order: list[tuple[str, str | None]] = []

    @venturi.task(kind="s_up", group_cap=100)
    async def up(ctx: Context[Any], carry: Item) -> None:
        order.append(("s_up", ctx.job.group))
        await asyncio.sleep(0.002)  # stays: the backlogs last past the worker's first looks

    @venturi.task(kind="s_down", group_cap=100)
    async def down(ctx: Context[Any], carry: Item) -> None:
        order.append(("s_down", ctx.job.group))
        await asyncio.sleep(0.002)  # stays: as up's

    high, normal, low = venturi.Priority.HIGH, venturi.Priority.NORMAL, venturi.Priority.LOW
    jobs = [up.job(Item(i), priority=high) for i in range(400)]
    jobs += [up.job(Item(i), group=f"t{i % GROUPS}", priority=normal) for i in range(400)]
    jobs += [down.job(Item(i), priority=low) for i in range(400)]
    jobs += [down.job(Item(i), group=f"t{i % GROUPS}", priority=high) for i in range(400)]
    await venturi.enqueue_many(conn, jobs)
    worker = Worker(None, dsn, [up, down], concurrency=4, poll_max=30)
    async with running(worker):
        await wait_until(lambda: len(order) == len(jobs), within=120)
    window = order[100:700]  # past the first looks, while every backlog lasts
    lagging = window.count(("s_down", None)) / len(window)
    lower = sum(1 for kind, grp in window if kind == "s_up" and grp is not None) / len(window)
    assert lagging >= 0.05, (lagging, lower)
    assert lower >= 0.05, (lagging, lower)
