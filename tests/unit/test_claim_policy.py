"""The claimer's decisions on its own (no database): which kinds a claim asks for, by
each kind's policy and the slots it occupies, and the priority floor's rotation."""

from __future__ import annotations

from collections import Counter

from tests.support.carries import noop_task
from tests.support.claims import claimer as make_claimer
from venturi import Priority, Rate
from venturi.runtime.config import Registration

DSN = "postgresql://nowhere.invalid/none"


def test_a_kind_at_its_cap_or_out_of_tokens_or_limited_elsewhere_is_not_claimed(
    kinds: list[str],
) -> None:
    occupied: Counter[str] = Counter()
    regs = [
        Registration.check(noop_task("cp_free"), None, None, None, None),
        Registration.check(noop_task("cp_capped", cap=2), None, None, None, None),
        Registration.check(noop_task("cp_local"), None, Rate(per_second=0.001), None, None),
        Registration.check(
            noop_task("cp_shared"), None, Rate(per_second=1, shared=True), None, None
        ),
        Registration.check(noop_task("cp_global"), None, None, None, 3),
    ]
    claimer = make_claimer(DSN, *regs, occupied=occupied)
    assert claimer.limits.claimable_kinds() == ["cp_capped", "cp_free", "cp_local"]
    assert claimer.limits.shared_claimable(0.0) == ["cp_shared"]
    assert claimer.limits.capped_claimable(0.0) == ["cp_global"]
    occupied["cp_capped"] = 2  # the in-flight set's count: the cap is reached
    claimer.limits.buckets["cp_local"].spend(1)  # its one token spent
    assert claimer.limits.claimable_kinds() == ["cp_free"]
    # A run settling (releasing) frees its slot for this claim's sizing.
    assert "cp_capped" in claimer.limits.claimable_kinds(Counter({"cp_capped": 1}))


def test_the_priority_floor_reserves_every_ratio_th_claim_for_lower_tiers(
    kinds: list[str],
) -> None:
    claimer = make_claimer(DSN, noop_task("cp_floor"))
    floors = [claimer.next_floor() for _ in range(16)]
    assert floors.count(Priority.LOW) == 1 and floors[15] == Priority.LOW
    assert [i + 1 for i, f in enumerate(floors) if f == Priority.NORMAL] == [4, 8, 12]
    strict = make_claimer(DSN, noop_task("cp_strict"), priority_ratio=None)
    assert {strict.next_floor() for _ in range(20)} == {Priority.HIGH}
    # Two streams of claims taking turns each keep the cadence: on one count, every
    # reserved claim (4, 8, ...) fell to the second.
    turns = make_claimer(DSN, noop_task("cp_turns"))
    first = [turns.next_floor(s) for _ in range(8) for s in ("ordinary", "grouped:k")][::2]
    assert [i + 1 for i, f in enumerate(first) if f == Priority.NORMAL] == [4, 8]
