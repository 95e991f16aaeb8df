"""Turns among kinds claimed one after another into the same free slots.

Kinds with a claim of their own (a grouped kind's groups, a kind with a shared rate, a
kind with a global cap) are claimed one statement each, each into the slots the ones
before it left. In a fixed order the first kind's backlog took every slot at each
iteration, and the kinds after it ran nothing until it drained. ``Turns`` counts the
jobs each kind took and offers the slots to the one that took fewest first. Neither a
kind first seen nor one back from a pause (at its cap, out of tokens, out of work) banks
turns: its count is kept within one fill of the worker's slots of the kind that took
most, so it goes first for at most about one fill. (A turn that moved on at each claim
fell in step with the other turns of the loop, which also alternate: one kind then got
every large fill and the other every small one.)
"""

from __future__ import annotations


class Turns:
    """The jobs each kind took (``served``), and the order of claims that follows."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.took: dict[str, int] = {}

    def order(self, kinds: list[str]) -> list[str]:
        """``kinds``, the one that took fewest first."""
        if len(kinds) < 2:
            return kinds
        took = self.took
        most = max(took.get(k, 0) for k in kinds)
        for k in kinds:
            took[k] = max(took.get(k, most), most - self.slots)
        return sorted(kinds, key=took.__getitem__)

    def served(self, kind: str, jobs: int) -> int:
        """``kind`` took ``jobs``; returns them."""
        self.took[kind] = self.took.get(kind, 0) + jobs
        return jobs
