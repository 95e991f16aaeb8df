"""The share of a kind's jobs without a group beside its groups (SPEC 13).

"Jobs without a group share one group of their own": when a kind's groups and its jobs
without a group both have work, the jobs without a group get one group's share of the
kind's claims (weight 1) against the groups' (their summed weights). They are claimed by
the ordinary claim, not the grouped one, so that they pay nothing for groups; the worker
keeps their share itself, by the claims it makes:

- each grouped job it claims of the kind owes the jobs without a group 1 / the groups'
  summed weight of a claim (``credit``); each job without a group it claims spends one;
- while their credit is under one claim, the ordinary claim leaves the kind's jobs
  without a group out (the worker's other kinds keep their turns with the groups'
  claim); slots the groups leave (every group at its cap, paused, out of tokens or out
  of work) go to the jobs without a group in the same iteration, without debt
  (work-conserving; ``Loop.fill_with_groups``);
- neither side banks credit while the other has no work: the jobs without a group found
  none (an ordinary claim that came back short) restart at one claim owed, and their
  debt is forgiven when the groups leave slots. An ordinary claim kept full by another
  kind's backlog does not tell that they have none, so they are never owed more than one
  fill of the worker's slots (``bound``): their next jobs after a pause take at most that
  much more than their share;
- a tier is kept: jobs without a group claimed at a better tier than the groups' best are
  not held back, spend nothing of the share, and the ordinary claim goes first; while
  held back they are let into one claim a second, the ordinary claim going first, which
  is how an urgent one enqueued meanwhile is found (it waits at most about that second).
  Jobs without a group of a worse tier than the groups' best (``lagging``) are held back
  whatever they are owed. Either way the lower tier gets ``priority_ratio``'s reserved
  turns (``reserved``: every ratio-th fill of the worker's, a cadence of its own): the
  groups' claim goes first in a reserved turn while the jobs without a group are
  urgent, and lagging ones are let in, their claim first, as the reserved claims of a
  kind without groups would take them.

The groups' summed weight and best tier come from ``group_shares``, read on the
recovery's timer beside the loop (about once a second), and only about the kinds whose
jobs without a group the worker claimed or held back since. Each worker keeps the share
over its own claims, so the whole fleet keeps it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from venturi import db
from venturi.db.conn import Conn, Record

# How often jobs without a group that are held back are let into a claim anyway (to
# find an urgent one): the pace of the look that reads the groups' weights.
LET_IN_EVERY = 1.0


@dataclass
class KindShare:
    """One grouped kind's jobs without a group, as this worker's claims saw them."""

    credit: float = 1.0  # claims owed to the jobs without a group
    weights: float = 0.0  # the groups' summed weight at the last look (0: none with work)
    head: int | None = None  # the groups' best tier at the last look
    urgent: bool = False  # the last ones claimed were of a better tier than the groups'
    lagging: bool = False  # the last ones claimed were of a worse tier than the groups'
    seen: bool = False  # claimed or held back since the last look
    read: bool = False  # the groups' weights were read at least once
    let_in: float = -math.inf  # when they were last let into a claim while held back


class Shares:
    """The jobs without a group of each grouped kind, against the kind's groups."""

    def __init__(self, schema: str, slots: int) -> None:
        self.schema = schema
        # The most credit the jobs without a group may hold: one claim owed and one fill.
        self.bound = 1.0 + slots
        self.kinds: dict[str, KindShare] = {}
        # This iteration lets held-back jobs without a group into its ordinary claim.
        self.letting_in = False

    def tiered(self) -> bool:
        """Whether some kind's jobs without a group are of another tier than its groups':
        then the worker's fills take reserved turns (``reserved``)."""
        return any(share.urgent or share.lagging for share in self.kinds.values())

    def held_back(
        self, grouped: AbstractSet[str], now: float, reserved: bool = False
    ) -> frozenset[str]:
        """The grouped kinds whose jobs without a group this iteration's ordinary claim
        leaves out: they took their share, or are of a worse tier than the groups' and
        this is not a ``reserved`` turn; and are not of a better tier than the groups'."""
        out = []
        self.letting_in = False
        for kind in grouped:
            share = self.kinds.get(kind)
            if share is None or share.weights <= 0 or share.urgent:
                continue
            if (share.credit >= 1 and not share.lagging) or (share.lagging and reserved):
                continue
            share.seen = True
            if now - share.let_in >= LET_IN_EVERY:
                share.let_in = now  # once a second, to find an urgent one
                self.letting_in = True
                continue
            out.append(kind)
        return frozenset(out)

    def groups_first(self, reserved: bool, turn: Callable[[], bool]) -> bool:
        """Whether the groups' claim goes before the ordinary claim: in its ``turn``
        (every other time), unless some kind's jobs without a group are of a better tier
        than its groups' or held-back ones are let in (then only in a ``reserved`` turn,
        the groups' then), or lagging ones are let in a reserved turn (theirs)."""
        if self.letting_in or any(share.urgent for share in self.kinds.values()):
            return reserved
        if reserved and any(share.lagging for share in self.kinds.values()):
            return False
        return turn()

    def took(
        self,
        rows: Iterable[Record],
        grouped: AbstractSet[str],
        every_tier: bool,
        asked: AbstractSet[str] = frozenset(),
    ) -> None:
        """Count a claim's rows of grouped kinds against each kind's share. A claim of
        ``every_tier`` (its priority floor at HIGH, not an anti-starvation claim that
        skipped the better tiers) also tells whether the jobs without a group of the
        kinds it ``asked`` for are urgent: none of them in it, they are not."""
        best: dict[str, int] = {}
        for row in rows:
            kind = row["kind"]
            if kind not in grouped:
                continue
            share = self.kinds.setdefault(kind, KindShare())
            if row["grp"] is not None:
                if share.weights > 0:
                    share.credit = min(share.credit + 1 / share.weights, self.bound)
                continue
            tier = row["priority"]
            share.seen = True
            best[kind] = min(best.get(kind, tier), tier)
            # The share is within a tier: one of a better tier than the groups' best is
            # not of their fair share, and spends nothing of it; nor one of a worse tier,
            # claimed in a reserved turn or in a slot the groups left (a debt run up
            # there held them back long after their tier met the groups').
            if share.head is None or tier == share.head:
                share.credit -= 1
        if not every_tier:
            return
        for kind in asked | best.keys():
            if (asked_share := self.kinds.get(kind)) is not None:
                tier, head = best.get(kind), asked_share.head
                asked_share.urgent = tier is not None and head is not None and tier < head
                asked_share.lagging = tier is not None and head is not None and tier > head

    def groups_left_slots(self) -> None:
        """The groups' claim left slots free: the jobs without a group take them owing
        nothing for it."""
        for share in self.kinds.values():
            share.credit = max(share.credit, 0.0)

    def found_all(self, grouped: AbstractSet[str], left_out: AbstractSet[str]) -> None:
        """An ordinary claim came back short: the jobs without a group of the grouped
        kinds it asked for have no more work now, and restart at one claim owed."""
        for kind in grouped - left_out:
            if (share := self.kinds.get(kind)) is not None:
                share.credit, share.urgent, share.lagging = 1.0, False, False

    def unread(self) -> bool:
        """Whether a kind's jobs without a group were claimed and its groups' weights were
        never read: until they are, the share is not kept, so the loop reads them at once
        rather than wait for the timer's next look."""
        return any(share.seen and not share.read for share in self.kinds.values())

    async def look(self, conn: Conn) -> None:
        """Read the groups' weights and best tier of the kinds whose jobs without a group
        were claimed or held back since the last look (on the recovery's timer, and by
        the loop the first time)."""
        kinds = sorted(k for k, share in self.kinds.items() if share.seen)
        if not kinds:
            return
        # Cleared before the read: the loop may claim meanwhile, and a kind it sees then
        # is read at the next look.
        for kind in kinds:
            self.kinds[kind].seen = False
        found = await db.groups.group_shares(conn, schema=self.schema, kinds=kinds)
        for kind in kinds:
            share, read = self.kinds[kind], found.get(kind)
            share.weights, share.head = (read.weights, read.head) if read else (0.0, None)
            share.read = True
            if share.weights <= 0:
                share.credit = max(share.credit, 0.0)  # no group has work: no debt
