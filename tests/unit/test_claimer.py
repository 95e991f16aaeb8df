"""How the claimer sizes its claims (no database: a fake connection answers
``job_claim`` and ``job_claim_one``): an idle worker's claim is one job, and once it finds
one the rest of the free slots are claimed in a batch, bounded by each kind's cap and
tokens; completions that ride the claim free their slots for it; a full claim goes again,
a short one stops; an empty reserved tier is claimed again without the floor."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from tests.support.carries import noop_task
from tests.support.claims import claimer as make_claimer
from tests.support.fakes import FakeConn, job_row, run_of
from venturi import Priority, Rate
from venturi.runtime.claimer import Claimer
from venturi.runtime.config import Registration
from venturi.runtime.run import Run
from venturi.runtime.settlement import Completed

DSN = "postgresql://nowhere.invalid/none"

# job_claim's parameters, by position: $1 name, $2 kinds, $3 leases, $4 floor, $5 limit;
# $6 the ids of the completions riding along.
KINDS, FLOOR, LIMIT, DONE_IDS = 1, 3, 4, 5


def _serving(kind: str, first_id: int = 1) -> FakeConn:
    """A queue with plenty of jobs of ``kind``: each claim gets its ``limit``; each
    completion riding along is settled."""
    ids = iter(range(first_id, 10_000))

    def claim(args: tuple[Any, ...]) -> list[dict[str, Any]]:
        # Every completion applies: job_claim answers only the lost ones.
        return [job_row(next(ids), kind) for _ in range(args[LIMIT])]

    def claim_one(args: tuple[Any, ...]) -> list[dict[str, Any]]:
        return [job_row(next(ids), kind, more=True)]

    # The look at the statistics a slow claim makes is answered by FakeConn itself.
    return FakeConn(job_claim=claim, job_claim_one=claim_one)


async def _in_a_backlog(claimer: Claimer, kind: str) -> None:
    """Make ``claimer``'s last claim a full batch, as in a worker draining a backlog (an
    idle worker's first claim is one job: job_claim_one). One batch claim is made."""
    await _fill(claimer, _serving(kind, first_id=5_000), 2)


async def _fill(
    claimer: Claimer, conn: FakeConn, free: int, done: list[Run] | None = None
) -> tuple[tuple[int, bool, bool], list[Any], list[tuple[list[Run], set[int]]]]:
    started: list[Any] = []
    heard: list[tuple[list[Run], set[int]]] = []
    answer = await claimer.fill(
        conn,
        free,
        asyncio.Event(),
        done or [],
        lambda runs, settled: heard.append((runs, set(settled))),
        started.extend,
    )
    return answer, started, heard


async def test_a_claim_asks_for_every_free_slot_and_goes_again_while_full(
    kinds: list[str],
) -> None:
    claimer = make_claimer(DSN, noop_task("cs_free"), concurrency=8)
    conn = _serving("cs_free")
    (free, short, unsent), started, _ = await _fill(claimer, conn, 8)
    # Idle before: one job in job_claim_one's statement; it found one, so the other seven
    # slots in one batch.
    claims = [name for name, _ in conn.calls if name.startswith("job_claim")]
    assert claims == ["job_claim_one", "job_claim"]
    assert [args[LIMIT] for args in conn.named("job_claim")] == [7]
    assert (free, short, unsent) == (0, False, False)
    assert [r["id"] for r in started] == list(range(1, 9))
    assert claimer.stats["claimed"] == 8
    # The queue had a backlog (the last claim came back full): every free slot at once.
    conn.calls.clear()
    await _fill(claimer, conn, 5)
    assert [args[LIMIT] for args in conn.named("job_claim")] == [5]
    assert conn.named("job_claim_one") == []


async def test_an_idle_worker_claims_one_job_in_the_smaller_statement(kinds: list[str]) -> None:
    claimer = make_claimer(DSN, noop_task("cs_one"))
    # The job and no more: one statement, and the worker stops there (short).
    alone = FakeConn(job_claim_one=lambda args: [job_row(1, "cs_one", more=False)])
    (free, short, unsent), started, _ = await _fill(claimer, alone, 5)
    assert [name for name, _ in alone.calls] == ["job_claim_one"]
    assert alone.named("job_claim_one")[0][KINDS] == ["cs_one"]
    assert (free, short, unsent) == (4, True, False)
    assert [r["id"] for r in started] == [1]
    # More are there: the rest of the slots in a batch, which found none here.
    more = FakeConn(job_claim_one=lambda args: [job_row(2, "cs_one", more=True)])
    assert (await _fill(claimer, more, 5))[0] == (4, True, False)
    assert [name for name, _ in more.calls] == ["job_claim_one", "job_claim"]
    assert [args[LIMIT] for args in more.named("job_claim")] == [4]
    # An empty queue: the one claim finds nothing and the worker stops there.
    empty = FakeConn()
    assert (await _fill(claimer, empty, 5))[0] == (5, True, False)
    assert [name for name, _ in empty.calls] == ["job_claim_one"]
    # The claims that found nothing: the batch after "more", and the one claim here.
    assert claimer.stats["empty_claims"] == 2


async def test_completions_take_the_batch_claim_and_one_job_claims_take_no_tier_turn(
    kinds: list[str],
) -> None:
    task = noop_task("cs_batch")
    claimer = make_claimer(DSN, task, priority_ratio=2, occupied=Counter({"cs_batch": 1}))
    # Idle claims of one job, however many: no turn of the anti-starvation cadence.
    for _ in range(3):
        conn = FakeConn()
        await _fill(claimer, conn, 3)
        assert [name for name, _ in conn.calls] == ["job_claim_one"]
    # Completions to carry: job_claim, which settles them in the same statement; the
    # first batch claim takes every tier, the second (priority_ratio 2) is reserved.
    floors = []
    for n in (9, 10):
        conn = FakeConn()
        await _fill(claimer, conn, 3, [run_of(task, n, outcome=Completed())])
        floors += [(name, args[FLOOR]) for name, args in conn.calls]
    assert floors == [("job_claim", Priority.HIGH), ("job_claim", Priority.NORMAL)]


async def test_a_batch_never_overshoots_a_cap_or_the_tokens(kinds: list[str]) -> None:
    occupied: Counter[str] = Counter({"cs_capped": 1})
    capped = noop_task("cs_capped", cap=3)
    claimer = make_claimer(DSN, capped, noop_task("cs_other"), occupied=occupied)
    conn = FakeConn(job_claim_one=lambda args: [job_row(1, "cs_other", more=True)])
    await _fill(claimer, conn, 10)
    [args] = conn.named("job_claim")
    assert sorted(args[KINDS]) == ["cs_capped", "cs_other"]
    assert args[LIMIT] == 2  # the cap's room: 3 - 1 running
    # A kind with a local rate limit: no more than the bucket holds (one token spent by
    # the idle worker's claim of one job).
    limited = Registration.check(noop_task("cs_rated"), None, Rate(10, burst=3), None, None)
    claimer = make_claimer(DSN, limited)
    conn = FakeConn(job_claim_one=lambda args: [job_row(1, "cs_rated", more=True)])
    await _fill(claimer, conn, 10)
    assert [args[LIMIT] for args in conn.named("job_claim")] == [2]


async def test_completions_riding_the_claim_free_their_slots_under_a_cap(
    kinds: list[str],
) -> None:
    capped = noop_task("cs_ride", cap=2)
    occupied: Counter[str] = Counter({"cs_ride": 2})  # at its cap, both finishing
    claimer = make_claimer(DSN, capped, occupied=occupied)
    done = [run_of(capped, 1, outcome=Completed()), run_of(capped, 2, outcome=Completed())]
    conn = _serving("cs_ride", first_id=10)
    (_, _, unsent), started, heard = await _fill(claimer, conn, 2, done)
    [args] = conn.named("job_claim")[:1]
    assert args[LIMIT] == 2 and list(args[DONE_IDS]) == [1, 2]
    # The completions were written by the claim: the loop hears which applied.
    assert heard == [(done, {1, 2})] and unsent is False
    assert [r["id"] for r in started] == [10, 11]


async def test_without_a_claimable_kind_completions_stay_to_be_settled(
    kinds: list[str],
) -> None:
    capped = noop_task("cs_full", cap=1)
    claimer = make_claimer(DSN, capped, occupied=Counter({"cs_full": 1}))
    conn = FakeConn()
    (free, short, unsent), _, heard = await _fill(claimer, conn, 3)
    assert conn.calls == [] and heard == []
    assert (free, short, unsent) == (3, False, False)
    done = [run_of(capped, 1, outcome=Completed())]
    claimer.limits.per_kind["cs_full"] = 2
    (_, _, unsent), _, _ = await _fill(claimer, conn, 3, done)
    assert conn.calls == [] and unsent is True


async def test_a_reserved_claim_is_one_statement_whatever_its_tiers_hold(
    kinds: list[str],
) -> None:
    # The statement fills the rest from every tier itself (test_sql_plans shows it): the
    # claimer sends the reserved claim once, and takes what it answers.
    claimer = make_claimer(DSN, noop_task("cs_tier"), priority_ratio=2)
    await _in_a_backlog(claimer, "cs_tier")  # the next batch claim is the 2nd: reserved
    conn = FakeConn(job_claim=lambda args: [job_row(7, "cs_tier")])
    (free, short, _), started, _ = await _fill(claimer, conn, 4)
    assert [(a[FLOOR], a[LIMIT]) for a in conn.named("job_claim")] == [(Priority.NORMAL, 4)]
    assert [r["id"] for r in started] == [7] and (free, short) == (3, True)


def test_the_token_wait_is_the_soonest_token(kinds: list[str]) -> None:
    limited = Registration.check(noop_task("cs_wait"), None, Rate(2, burst=1), None, None)
    claimer = make_claimer(DSN, limited)
    assert claimer.limits.token_wait(time.monotonic()) is None  # a token in hand
    claimer.limits.buckets["cs_wait"].spend(1)
    wait = claimer.limits.token_wait(time.monotonic())
    assert wait is not None and 0 < wait <= 0.5
    assert claimer.limits.claimable_kinds() == []


def test_a_shared_wait_that_passed_during_the_fill_is_no_wait(kinds: list[str]) -> None:
    # The fill left the kind out for a wait still to come when it began; a slow claim
    # after it outlasted the wait: claim again at once (0), not wait for nothing (None).
    shared = Registration.check(noop_task("cs_shared"), None, Rate(2, shared=True), None, None)
    claimer = make_claimer(DSN, shared)
    now = time.monotonic()
    claimer.limits.shared_until["cs_shared"] = now - 0.01  # passed, though ahead when it began
    assert claimer.limits.token_wait(now - 0.02) == 0.0
    assert claimer.limits.token_wait(now) is None  # passed before the fill: it was claimable
    claimer.limits.shared_until["cs_shared"] = now + 0.3
    wait = claimer.limits.token_wait(now)
    assert wait is not None and 0.2 < wait <= 0.3
