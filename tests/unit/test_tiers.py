"""The order of a fill's claims by tier (venturi/runtime/tiers.py)."""

from __future__ import annotations

from venturi.priority import Priority
from venturi.runtime.tiers import PEEK_EVERY, Tiers

HIGH, NORMAL, LOW = Priority.HIGH, Priority.NORMAL, Priority.LOW


def tiers_of(**best: int | None) -> Tiers:
    tiers = Tiers()
    for claim, tier in best.items():
        tiers.saw(claim, [] if tier is None else [{"priority": tier}], 0)
    return tiers


def test_the_better_tier_goes_first_but_in_a_turn_reserved_for_the_lower() -> None:
    tiers = tiers_of(a=LOW, b=HIGH, c=NORMAL)
    assert tiers.order(["a", "b", "c"], HIGH) == ["b", "c", "a"]
    assert tiers.order(["a", "b", "c"], NORMAL) == ["c", "a", "b"]  # NORMAL and LOW first
    assert tiers.order(["a", "b", "c"], LOW) == ["a", "b", "c"]  # LOW first, then by tier
    assert tiers.order(["a", "b", "c"], HIGH, peek=True) == ["a", "c", "b"]


def test_ties_keep_the_turns_and_an_unknown_claim_counts_as_normal() -> None:
    tiers = tiers_of(a=NORMAL, b=NORMAL)
    assert tiers.order(["b", "a", "new"], HIGH) == ["b", "a", "new"]
    assert tiers.order(["new", "a"], HIGH, best={"a": HIGH}) == ["a", "new"]


def test_a_reserved_claim_says_nothing_of_its_best_tier_and_an_empty_one_has_none() -> None:
    tiers = tiers_of(a=HIGH)
    tiers.saw("a", [{"priority": LOW}], NORMAL)  # a reserved claim's rows
    assert tiers.of(["a"]) == HIGH
    tiers.saw("a", [], HIGH)
    assert tiers.of(["a"]) is None


def test_claims_differ_when_two_tiers_are_known_or_one_claim_is_not() -> None:
    assert not tiers_of(a=HIGH, b=HIGH).differ(["a", "b"])
    assert tiers_of(a=HIGH, b=LOW).differ(["a", "b"])
    assert not tiers_of(a=HIGH, b=None).differ(["a", "b"])  # b has no work
    assert tiers_of(a=HIGH).differ(["a", "b"])  # b never claimed


def test_the_groups_go_first_by_tier_and_take_turns_within_one() -> None:
    tiers = tiers_of(ordinary=HIGH, **{"grouped:k": LOW})
    assert tiers.goes_first(["grouped:k"], ["ordinary"], HIGH, peek=False) is False
    assert tiers.goes_first(["grouped:k"], ["ordinary"], LOW, peek=False) is True
    assert tiers.goes_first(["grouped:k"], ["ordinary"], HIGH, peek=True) is True
    same = tiers_of(ordinary=NORMAL, **{"grouped:k": NORMAL})
    assert same.goes_first(["grouped:k"], ["ordinary"], HIGH, peek=False) is None


def test_a_peek_once_a_second_for_each_choice() -> None:
    tiers = Tiers()
    assert tiers.peek(100.0, "grouped")
    assert not tiers.peek(100.0 + PEEK_EVERY / 2, "grouped")
    assert tiers.peek(100.0 + PEEK_EVERY / 2, "limited")
    assert tiers.peek(100.0 + PEEK_EVERY, "grouped")
