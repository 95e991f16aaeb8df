"""Tiers between the claims of one fill (SPEC 13: "Priority tiers and ``priority_ratio``
anti-starvation keep their meaning between tiers").

A worker claims in several statements, one after another, into the same free slots:
each grouped kind's claim (``grouped:KIND``), each claim of a kind with a shared rate or
a global cap (``shared:KIND``, ``capped:KIND``), and the ordinary claim of its other
kinds (``ordinary``). The first to run takes every slot it can, so their order is the
tier order between them. Each orders its own rows by tier; between them the worker keeps
the best tier each one's last claim found (``saw``), and among the claims that may run
now (``Limits.live``: not one at its cap or out of tokens, whose last tier is stale) the
better goes first, unless the turn is one ``priority_ratio`` reserves for the lower
tiers, as a single claim's floor does (``order``). They took turns whatever their tiers
before: a grouped (or capped) kind's backlog of LOW jobs took half the claims while
another kind's HIGH backlog waited, under strict priority too.

A claim's tier is known only when it runs: under strict priority a worse one would not
run while the better one has a backlog, and would not see better work that came since,
so it goes first once a second (``peek``): at most one fill's worth of a lower tier a
second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from venturi.priority import Priority

# How often, under strict priority, the claim believed worse goes first anyway.
PEEK_EVERY = 1.0


class Tiers:
    """The best tier each claim of the worker's found at its last claim at floor 0."""

    def __init__(self) -> None:
        self.best: dict[str, int | None] = {}
        self.peeked: dict[str, float] = {}

    def saw(self, claim: str, rows: Iterable[Mapping[str, Any]], floor: int) -> None:
        """``claim`` (``ordinary``, ``grouped:KIND`` ...) returned ``rows`` at ``floor``:
        at floor 0 the best of them is its tier (none: it has no work now). A reserved
        claim's rows skipped the better tiers, and say nothing of its best; none at all
        say it has no work (it fills from every tier) or may claim none now (a kind at
        its global cap, whose stale tier put its sort's LOW backlog first)."""
        if floor == 0 or not rows:
            self.best[claim] = min((int(r["priority"]) for r in rows), default=None)

    def of(self, claims: Iterable[str]) -> int | None:
        """The best tier known among ``claims`` (None: none known)."""
        return min((t for c in claims if (t := self.best.get(c)) is not None), default=None)

    def differ(self, claims: Iterable[str]) -> bool:
        """Whether ``claims`` may be of more than one tier: known to be, or one of them
        never claimed at floor 0 yet (it runs in the reserved turns, and is learnt)."""
        claims = list(claims)
        known = {t for c in claims if (t := self.best.get(c)) is not None}
        return len(known) > 1 or any(c not in self.best for c in claims)

    def order(
        self,
        claims: list[str],
        level: int,
        best: Mapping[str, int] | None = None,
        peek: bool = False,
    ) -> list[str]:
        """``claims`` (in the order of their turns) by tier: the best first; at a
        reserved ``level`` (a floor above HIGH), those of that tier or worse first, as a
        claim at that floor takes them; ``peek``: the worst first. ``best``: their tiers,
        when not this worker's (a claim not known counts as NORMAL). Ties keep the order
        of the turns."""
        tiers = self.best if best is None else best

        def key(claim: str) -> tuple[int, int]:
            tier = tiers.get(claim)
            tier = Priority.NORMAL if tier is None else tier
            return (0 if level and tier >= level else 1 if level else 0, tier)

        return sorted(claims, key=key, reverse=peek)

    def goes_first(self, these: list[str], those: list[str], level: int, peek: bool) -> bool | None:
        """Whether the claims ``these`` go before the claims ``those`` (the grouped kinds'
        before the ordinary claim, say), by their best tiers (``order``); None when they
        are of one tier or either is not known."""
        mine, theirs = self.of(these), self.of(those)
        if mine is None or theirs is None or mine == theirs:
            return None
        best = {"these": mine, "those": theirs}
        return self.order(["those", "these"], level, best, peek)[0] == "these"

    def sort_first(self, live: list[str], sort: str, other: str, level: int, peek: bool) -> bool:
        """Whether the ``live`` claims of kinds of ``sort`` (capped, shared) go before those
        of ``other``, by tier; in the fixed order (``other`` first) within one."""
        these, those = (
            [n for n in live if n.startswith(f"{sort}:")],
            [n for n in live if n.startswith(f"{other}:")],
        )
        return bool(self.goes_first(these, those, level, peek))

    def kinds(self, sort: str, kinds: list[str], level: int, peek: bool) -> list[str]:
        """``kinds`` (in the order of their turns) of the claims of ``sort`` (grouped,
        shared, capped) by tier."""
        ordered = self.order([f"{sort}:{k}" for k in kinds], level, peek=peek)
        return [name.split(":", 1)[1] for name in ordered]

    def peek(self, now: float, which: str) -> bool:
        """Whether the claims believed worse of ``which`` choice go first now, under
        strict priority."""
        if now - self.peeked.get(which, -math.inf) < PEEK_EVERY:
            return False
        self.peeked[which] = now
        return True
