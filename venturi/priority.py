"""The three priority tiers a job can have, and the claims' anti-starvation floor."""

from __future__ import annotations

import enum


class Priority(enum.IntEnum):
    """Stored as a smallint: lower is more urgent, so the claim orders by ``priority ASC``.

    The anti-starvation filter ``priority >= floor`` then reads as written: floor 0 takes
    every tier, a raised floor reserves the claim for the lower tiers.
    """

    HIGH = 0
    NORMAL = 1
    LOW = 2


def floor(claims: int, ratio: int | None) -> Priority:
    """The priority floor of a worker's ``claims``-th claim: weighted anti-starvation.

    Every ``ratio``-th claim is reserved for NORMAL and LOW, every ``ratio**2``-th for LOW,
    so each tier keeps a share while higher tiers get about ``ratio`` times more, and no
    tier waits forever behind a busier one. None means strict priority. A reserved claim
    that finds its tiers short fills the rest from every tier in the same statement
    (``job_claim``'s fallback), so a reserved tier that is empty does not waste the slots,
    nor a round trip.
    """
    if ratio is None:
        return Priority.HIGH
    if claims % (ratio * ratio) == 0:
        return Priority.LOW
    if claims % ratio == 0:
        return Priority.NORMAL
    return Priority.HIGH
