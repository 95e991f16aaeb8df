"""The three priority tiers a job can have."""

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
