"""What each kind's limits let this worker claim now, as the worker knows them: its own
cap of the kind and its local token bucket, and the waits it keeps for the limits the
database holds (a kind's shared bucket found empty, its global cap found full, a grouped
kind's shared bucket found empty), so that no claim asks for a kind in vain, and the
loop wakes when one may be claimed again."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from venturi.rate import Rate, TokenBucket
from venturi.runtime.config import KindPolicy
from venturi.runtime.run import Run

# How long a worker leaves a kind found at its global cap before it looks again: a place
# freed by another worker's settlement sends no notification (this worker's own runs
# ending clear the wait: places_freed).
CAP_RECHECK = 0.5

# How long a worker leaves a grouped kind whose claim found nothing to do (no job, no
# group to wake, none held by another claim) before it claims it again, unless a
# notification names the kind, a run of it ends, or a job comes due. Each grouped kind is
# a statement of its own: a worker of one busy grouped kind and 19 idle ones claimed each
# idle one at every turn, and drained at a quarter of the pace (benchmarks/JOURNAL.md).
# The most a grouped job that becomes due by its time (a retry's backoff, a token) waits
# for it while the worker is busy; an idle worker wakes for it as before.
GROUPED_RECHECK = 0.25


class Limits:
    """Each kind's limits for one worker run. ``occupied`` counts each kind's occupied
    slots (the in-flight set's, as runs start and settle)."""

    def __init__(
        self, policies: Mapping[str, KindPolicy], occupied: Counter[str], poll_max: float
    ) -> None:
        self.kinds = sorted(policies)
        self.policies = policies
        self.per_kind = occupied
        self.cap_recheck = min(CAP_RECHECK, poll_max)
        rates = {k: p.rate for k, p in policies.items() if p.rate is not None}
        self.buckets = {k: TokenBucket(r) for k, r in rates.items() if not r.shared}
        # Kinds with a shared (database) bucket; until = when an empty bucket has its
        # next token.
        self.shared: dict[str, Rate] = {k: r for k, r in rates.items() if r.shared}
        self.shared_until: dict[str, float] = {}
        # Kinds with a global cap, claimed on their own (their shared rate, if any, in the
        # same transaction); until = when a kind found at its cap is looked at again.
        self.global_caps = {
            k: p.global_cap for k, p in policies.items() if p.global_cap is not None
        }
        self.capped_until: dict[str, float] = {}
        # Grouped kinds whose shared bucket the groups' claim found empty; until = its
        # next token.
        self.grouped_until: dict[str, float] = {}
        # Grouped kinds whose claim found nothing to do; until = grouped_recheck later.
        self.grouped_dry: dict[str, float] = {}
        self.grouped_recheck = GROUPED_RECHECK
        # The kinds the ordinary claim takes (the others have claims of their own).
        self.ordinary = [
            k for k in self.kinds if k not in self.shared and k not in self.global_caps
        ]

    def open(self, kind: str, releasing: int = 0) -> bool:
        """Under this worker's cap of ``kind`` (``releasing`` runs counted as finished),
        with a token of its local bucket if it has one."""
        cap, bucket = self.policies[kind].cap, self.buckets.get(kind)
        return (cap is None or self.per_kind[kind] - releasing < cap) and (
            bucket is None or bucket.available() >= 1
        )

    def room(self, kind: str, free: int, releasing: int = 0) -> int:
        """How many of ``free`` slots a claim of ``kind`` alone may fill: within this
        worker's cap of the kind (``releasing`` runs counted as finished) and its local
        bucket's whole tokens (a kind with a shared rate has no local bucket: its database
        bucket is taken in the claim)."""
        room = free
        if (cap := self.policies[kind].cap) is not None:
            room = min(room, cap - (self.per_kind[kind] - releasing))
        if (bucket := self.buckets.get(kind)) is not None:
            room = min(room, bucket.available())
        return room

    def claimable_kinds(self, releasing: Counter[str] | None = None) -> list[str]:
        """The ordinary claim's kinds under their cap, counting ``releasing`` runs as
        finished (kinds with a shared rate or a global cap have claims of their own)."""
        rel = releasing or Counter()
        return [k for k in self.ordinary if self.open(k, rel[k])]

    def shared_claimable(self, now: float) -> list[str]:
        """Kinds with a shared rate (and no global cap) a claim may try now."""
        return [
            k
            for k in self.shared
            if self.open(k) and self.shared_until.get(k, 0.0) <= now and k not in self.global_caps
        ]

    def capped_claimable(self, now: float) -> list[str]:
        """Kinds with a global cap that a claim may try now: under this worker's own
        cap, with a token if locally rate-limited, not found full (or out of shared
        tokens) a moment ago."""
        return [
            k for k in self.global_caps if self.open(k) and self.capped_until.get(k, 0.0) <= now
        ]

    def grouped_claimable(
        self, now: float, grouped: AbstractSet[str], releasing: Counter[str] | None = None
    ) -> list[str]:
        """Of the ``grouped`` kinds, those a claim may try now: under this worker's cap
        (``releasing`` runs counted as finished), with a local token, not found at their
        global cap or out of shared tokens a moment ago."""
        rel = releasing or Counter()
        return [
            k
            for k in sorted(grouped)
            if self.open(k, rel[k])
            and self.grouped_until.get(k, 0.0) <= now
            and self.capped_until.get(k, 0.0) <= now
        ]

    def claimable_now(self, now: float, grouped: AbstractSet[str]) -> list[str]:
        """Every kind a claim of any shape may try now (the ordinary claim's, and those of
        kinds with a shared rate, a global cap or groups)."""
        kinds = self.claimable_kinds() + self.shared_claimable(now) + self.capped_claimable(now)
        return sorted(set(kinds + self.grouped_claimable(now, grouped)))

    def live(self, now: float, grouped: AbstractSet[str], plain: bool = True) -> list[str]:
        """The claims that may run now, by name (runtime/tiers.py): ``ordinary`` (when
        ``plain``, it does not rest, and a kind of it is under its cap), ``shared:KIND``,
        ``capped:KIND`` and ``grouped:KIND`` (not resting). Only these compare their
        tiers: a kind at its cap or out of tokens kept the tier of its last claim, and a
        LOW backlog of another kind of its sort then went ahead of a NORMAL one."""
        names = ["ordinary"] if plain and self.claimable_kinds() else []
        names += [f"shared:{k}" for k in self.shared_claimable(now)]
        names += [f"capped:{k}" for k in self.capped_claimable(now)]
        return names + [
            f"grouped:{k}" for k in self.grouped_claimable(now, grouped) if not self.dry(k, now)
        ]

    def token_wait(self, since: float) -> float | None:
        """Seconds until a kind held back only by its rate limit (or found at its global
        cap) may be claimed again; 0 for one whose wait was still to come at ``since``
        (when the fill began, so it left the kind out) and has passed since: a slow
        claim after the kind's may outlast its wait, and its jobs, visible since they
        were enqueued, are no scheduled job for ``until_next_visible`` to wake for."""
        waits = [b.wait() for b in self.buckets.values() if b.available() < 1]
        now = time.monotonic()
        for until in (self.shared_until, self.capped_until, self.grouped_until):
            waits += [max(0.0, t - now) for t in until.values() if t > since]
        return min(waits) if waits else None

    def found(self, until: dict[str, float], kind: str, wait: float) -> None:
        """A claim found ``kind``'s limit held (``wait`` seconds until it may be tried
        again, in ``until``) or not (0)."""
        if wait:
            until[kind] = time.monotonic() + wait
        else:
            until.pop(kind, None)

    def places_freed(self, runs: Iterable[Run]) -> None:
        """This worker's ``runs`` ended: a kind of theirs found at its global cap is tried
        again at once (their places are free once they settle), not after CAP_RECHECK,
        which waits for places other workers hold."""
        if self.capped_until:  # else nothing to clear: no per-run work on the hot path
            for run in runs:
                self.capped_until.pop(run.task.kind, None)
        if self.grouped_dry:  # a run's end frees its group's slot: claim the kind again
            self.wet(run.task.kind for run in runs)

    def dry(self, kind: str, now: float) -> bool:
        """Whether ``kind``'s grouped claim found nothing to do less than
        GROUPED_RECHECK ago (and nothing since said otherwise: ``wet``)."""
        return self.grouped_dry.get(kind, 0.0) > now

    def resting(self, now: float) -> list[str]:
        """The grouped kinds ``dry`` now."""
        return [k for k, until in self.grouped_dry.items() if until > now]

    def wet(self, kinds: Iterable[str] | None = None) -> None:
        """``kinds`` (None: every kind) may have grouped work again: a notification
        named them, a run of theirs ended, a job came due."""
        if self.grouped_dry:
            if kinds is None:
                self.grouped_dry.clear()
            else:
                for kind in kinds:
                    self.grouped_dry.pop(kind, None)

    def any_capped(self, runs: Iterable[Run]) -> bool:
        """Whether one of ``runs`` is of a kind with a global cap."""
        return any(run.task.kind in self.global_caps for run in runs)
