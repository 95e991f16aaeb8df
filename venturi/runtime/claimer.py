"""Claim policy: which kinds a claim asks for, how many jobs, at which priority floor.

The claim filter is the registered kinds minus those at their cap or out of tokens.
A batch never overshoots a cap or spends more tokens than a local bucket holds. Kinds
with a shared (database) rate limit are claimed on their own, each in a transaction
with its bucket, and so are kinds with a global cap, each in a transaction that holds
the kind's cap lock. Completions ride the claim: one statement settles them and claims.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime

from venturi import db
from venturi.db.conn import Conn, Record, Source
from venturi.priority import floor
from venturi.rate import TokenBucket
from venturi.runtime.config import KindPolicy, WorkerConfig
from venturi.runtime.inflight import let_them_start
from venturi.runtime.instruments import Instruments
from venturi.runtime.run import Run
from venturi.runtime.statistics import Statistics
from venturi.runtime.turns import Turns

# How long a worker leaves a kind found at its global cap before it looks again: a place
# freed by another worker's settlement sends no notification.
CAP_RECHECK = 0.5
Kinds = AbstractSet[str]


class Claimer:
    """Claims for one worker run, by each kind's ``KindPolicy``. ``occupied`` counts each
    kind's occupied slots (the in-flight set's, as runs start and settle)."""

    def __init__(
        self,
        config: WorkerConfig,
        claimant: db.Claimant,
        policies: Mapping[str, KindPolicy],
        occupied: Counter[str],
        instruments: Instruments,
    ) -> None:
        self.schema = config.schema
        # The statement deadline, also set on the server for a shared-rate claim's
        # transaction.
        self.deadline = config.statement_deadline()
        self.claimant = claimant
        self.synchronous_commit = config.synchronous_commit
        self.kinds = sorted(policies)
        self.policies = policies
        self.priority_ratio = config.priority_ratio
        self.poll_max = config.poll_max
        self.per_kind = occupied
        self.stats = instruments.stats
        self._m = instruments.prom
        rates = {k: p.rate for k, p in policies.items() if p.rate is not None}
        self.buckets = {k: TokenBucket(r) for k, r in rates.items() if not r.shared}
        # Kinds with a shared (database) bucket; until = when an empty bucket has its
        # next token.
        self.shared = {k: r for k, r in rates.items() if r.shared}
        self.shared_until: dict[str, float] = {}
        # Kinds with a global cap, claimed on their own (their shared rate, if any, in the
        # same transaction); until = when a kind found at its cap is looked at again.
        self.global_caps = {
            k: p.global_cap for k, p in policies.items() if p.global_cap is not None
        }
        self.capped_until: dict[str, float] = {}
        # Kinds whose grouped jobs this worker claims with job_claim_grouped (SPEC 13):
        # those that declare group limits, and those the database has groups of (found
        # by until_next_visible's lookup). Their jobs without a group go by the claims above.
        self.declared_grouped = {
            k for k, p in policies.items() if p.task.group_cap or p.task.group_rate
        }
        self.grouped = set(self.declared_grouped)
        self.grouped_until: dict[str, float] = {}
        self._first = {"grouped": False, "limited": False}  # see turn
        self.turns = {k: Turns(config.concurrency) for k in ("grouped", "shared", "capped")}
        # The last fill left a kind out for want of a local token (see fill).
        self.tokens_short = False
        self._claims = 0
        self.floor = 0  # the last claim's floor: above 0, its rows skipped better tiers
        # A slow claim into a backlog looks at the live table's statistics.
        self.statistics = Statistics(config.schema, instruments)
        # The last claim filled its batch: a backlog, against which the claim's cached
        # plan may be made anew (db.held.Held.fetch_planned).
        self._backlog = False
        self._grouped_backlog = False  # the same, for the last grouped claim
        # Lookups in a row that found a job due which the claim before did not take.
        self._due_again = 0
        # When due workflow timers were last looked for (time.monotonic()): by
        # until_next_visible when the loop idles, else by wake_due_timers; a busy loop
        # first looks poll_max after it starts.
        self.timers_at = time.monotonic()

    def _open(self, kind: str, releasing: int = 0) -> bool:
        """Under this worker's cap of ``kind`` (``releasing`` runs counted as finished),
        with a token of its local bucket if it has one."""
        cap, bucket = self.policies[kind].cap, self.buckets.get(kind)
        return (cap is None or self.per_kind[kind] - releasing < cap) and (
            bucket is None or bucket.available() >= 1
        )

    def claimable_kinds(self, releasing: Counter[str] | None = None) -> list[str]:
        """Registered kinds under their cap, counting ``releasing`` runs as finished."""
        rel = releasing or Counter()
        return [
            k
            for k in self.kinds
            if self._open(k, rel[k]) and k not in self.shared and k not in self.global_caps
        ]

    def shared_claimable(self, now: float) -> list[str]:
        return [
            k
            for k in self.shared
            if self._open(k) and self.shared_until.get(k, 0.0) <= now and k not in self.global_caps
        ]

    def capped_claimable(self, now: float) -> list[str]:
        """Kinds with a global cap that a claim may try now: under this worker's own
        cap, with a token if locally rate-limited, not found full (or out of shared
        tokens) a moment ago."""
        return [
            k for k in self.global_caps if self._open(k) and self.capped_until.get(k, 0.0) <= now
        ]

    def turn(self, claims: str) -> bool:
        """Whether ``claims`` go before the ordinary claim this time: every other time, so
        that neither's backlog keeps the other's jobs, however old, out of every slot.
        ``grouped``: the groups' claim; ``limited``: the claims of kinds with a shared
        rate or a global cap."""
        first = self._first[claims] = not self._first[claims]
        return first

    def grouped_claimable(self, now: float) -> list[str]:
        """Grouped kinds a claim may try now: under this worker's cap, with a local token,
        not found at their global cap or out of shared tokens a moment ago."""
        return [
            k
            for k in sorted(self.grouped)
            if self._open(k)
            and self.grouped_until.get(k, 0.0) <= now
            and self.capped_until.get(k, 0.0) <= now
        ]

    def claimable_now(self, now: float) -> list[str]:
        """Every kind a claim of any shape may try now (the ordinary claim's, and those of
        kinds with a shared rate, a global cap or groups)."""
        kinds = self.claimable_kinds() + self.shared_claimable(now) + self.capped_claimable(now)
        return sorted(set(kinds + self.grouped_claimable(now)))

    def token_wait(self) -> float | None:
        """Seconds until a kind held back only by its rate limit gets a token."""
        waits = [b.wait() for b in self.buckets.values() if b.available() < 1]
        now = time.monotonic()
        waits += [max(0.0, t - now) for t in self.shared_until.values() if t > now]
        waits += [max(0.0, t - now) for t in self.capped_until.values() if t > now]
        waits += [max(0.0, t - now) for t in self.grouped_until.values() if t > now]
        return min(waits) if waits else None

    def next_floor(self) -> int:
        """The priority floor of the next claim (``venturi.priority.floor``)."""
        self._claims += 1
        self.floor = floor(self._claims, self.priority_ratio)
        return self.floor

    async def fill(
        self,
        conn: Conn,
        free: int,
        shutdown: asyncio.Event,
        done: list[Run],
        completed: Callable[[list[Run], AbstractSet[int]], None],
        start: Callable[[list[Record]], None],
        left_out: Kinds = frozenset(),
    ) -> tuple[int, bool, bool]:
        """Settle ``done`` (completions) and claim into ``free`` slots, in as few
        statements as possible, of the kinds not ``left_out``. ``completed`` hears which
        completions applied; ``start`` gets each claim's rows at once. Returns the slots
        still free, whether the queue had nothing more to give, and whether ``done`` is
        still to be settled (no claim ran)."""
        short = False
        while free > 0 and not shutdown.is_set():
            releasing = Counter(r.task.kind for r in done)
            kinds = [k for k in self.claimable_kinds(releasing) if k not in left_out]
            # A kind its local bucket held out of this claim: if the bucket refills before
            # the loop asks how long to wait, token_wait() finds no wait, and the idle
            # lookup cannot see a job visible since its creation (jobs_next_visible_idx
            # holds only later ones): the loop must claim again, not sleep poll_max.
            self.tokens_short = any(b.available() < 1 for b in self.buckets.values())
            if not kinds:
                break
            # A batch must not overshoot a cap nor spend more tokens than a bucket holds:
            # it is sized to the tightest room.
            limit = min(self._room(k, free, releasing[k]) for k in kinds)
            leases = [self.policies[k].lease for k in kinds]
            # Nothing to settle and no backlog seen (the last claim came back short): an
            # idle worker that a notification woke (a pickup) claims one job, the first
            # in claim order, in job_claim_one's smaller statement; if it says more are
            # there, the next pass claims the rest of the slots in a batch. Such a claim
            # takes no turn of the anti-starvation cadence: a tier waits behind others
            # only in a backlog, and a backlog's claims are batches. `full`: the queue has
            # more to give (a claim of one that says so; a batch that came back full).
            one = not done and not self._backlog and limit >= 1
            sent = time.monotonic()
            if one:
                settled: AbstractSet[int] = frozenset()
                self.floor = 0
                rows, full = await db.claims.job_claim_one(
                    conn,
                    schema=self.schema,
                    claimant=self.claimant,
                    kinds=kinds,
                    leases=leases,
                    synchronous_commit=self.synchronous_commit,
                )
            else:
                rows, settled = await db.claims.job_claim(
                    conn,
                    schema=self.schema,
                    claimant=self.claimant,
                    kinds=kinds,
                    leases=leases,
                    floor=self.next_floor(),
                    limit=limit,
                    done=_completions(done),
                    replan=self._backlog,
                    synchronous_commit=self.synchronous_commit,
                )
                full = len(rows) >= limit
            took = time.monotonic() - sent
            self._backlog = full
            completed(done, settled)
            done = []
            await self._started(rows, start)
            # A claim of one job into a backlog that was slow looks too: its plan, made
            # while the queue was idle, may read the table (tests: test_claim_statistics).
            await self.statistics.after_claim(conn, full, took)
            free -= len(rows)
            if not full:
                short = True
                break
        return free, short, bool(done)

    async def fill_shared(
        self, conn: Source, free: int, start: Callable[[list[Record]], None], left_out: Kinds
    ) -> int:
        """Claim kinds with a shared rate limit, each within its database bucket; how
        many jobs were claimed."""
        taken, turns = 0, self.turns["shared"]
        for kind in turns.order(self.shared_claimable(time.monotonic())):
            room = self._room(kind, free - taken)
            if room < 1 or kind in left_out:
                continue
            rate = self.shared[kind]
            (rows, _), wait = await db.claims.claim_within_rate(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                kind=kind,
                lease=self.policies[kind].lease,
                per_second=rate.per_second,
                burst=rate.burst,
                wanted=room,
                deadline=self.deadline,
            )
            if wait:
                self.shared_until[kind] = time.monotonic() + wait
            else:
                self.shared_until.pop(kind, None)
            taken += turns.served(kind, await self._started(rows, start))
        return taken

    async def fill_capped(
        self, conn: Source, free: int, start: Callable[[list[Record]], None], left_out: Kinds
    ) -> int:
        """Claim kinds with a global cap, each in a transaction holding its cap lock (and
        within its shared bucket, if it has one); how many jobs were claimed. A kind
        found at its cap is left alone for ``CAP_RECHECK`` seconds: another worker's
        settlement, which frees a place, sends no notification."""
        taken, turns = 0, self.turns["capped"]
        now = time.monotonic()
        for kind in turns.order(self.capped_claimable(now)):
            room = self._room(kind, free - taken)
            if room < 1 or kind in left_out:
                continue
            rate = self.shared.get(kind)
            global_cap = self.global_caps[kind]
            rows, held, wait = await db.claims.claim_within_cap(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                kind=kind,
                lease=self.policies[kind].lease,
                global_cap=global_cap,
                wanted=room,
                rate=None if rate is None else (rate.per_second, rate.burst),
                deadline=self.deadline,
            )
            if wait:
                self.capped_until[kind] = time.monotonic() + wait
            elif held >= global_cap:
                self.capped_until[kind] = time.monotonic() + min(CAP_RECHECK, self.poll_max)
            else:
                self.capped_until.pop(kind, None)
            taken += turns.served(kind, await self._started(rows, start))
        return taken

    async def fill_grouped(
        self,
        conn: Source,
        free: int,
        start: Callable[[list[Record]], None],
        done: list[Run],
        completed: Callable[[list[Run], AbstractSet[int]], None],
    ) -> tuple[int, bool, list[Run]]:
        """Claim the grouped jobs of each grouped kind (``db.groups.claim_grouped``), the
        completions ``done`` riding the first claim that runs (``completed`` hears which
        applied, as in ``fill``): how many were claimed, whether to claim again at once (a
        claim made groups ready, which its own snapshot could not take, or met groups
        another claim held), and the completions still to settle (no claim ran)."""
        taken, again, turns = 0, False, self.turns["grouped"]
        for kind in turns.order(self.grouped_claimable(time.monotonic())):
            policy = self.policies[kind]
            room = self._room(kind, free - taken)
            if room < 1:
                continue
            rate, group_rate = self.shared.get(kind), policy.task.group_rate
            global_cap = self.global_caps.get(kind)
            sent = time.monotonic()
            claim, wait = await db.groups.claim_grouped(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                kind=kind,
                lease=policy.lease,
                floor=self.next_floor(),
                limit=room,
                limits=db.groups.GroupLimits(
                    policy.task.group_cap,
                    None if group_rate is None else group_rate.per_second,
                    None if group_rate is None else group_rate.burst,
                ),
                global_cap=global_cap,
                rate=None if rate is None else (rate.per_second, rate.burst),
                deadline=self.deadline,
                synchronous_commit=self.synchronous_commit,
                done=_completions(done),
                replan=self._grouped_backlog,
            )
            took = time.monotonic() - sent
            self._grouped_backlog = len(claim.claimed) >= room
            if wait:  # the kind's bucket was empty: no claim ran, done is still to settle
                self.grouped_until[kind] = time.monotonic() + wait
            else:
                completed(done, claim.settled)
                done = []
                if global_cap is not None and (claim.held or 0) >= global_cap:
                    self.capped_until[kind] = time.monotonic() + min(CAP_RECHECK, self.poll_max)
                else:
                    self.grouped_until.pop(kind, None)
            rows = claim.claimed
            # Claim again at once when this one came back short for a reason its own
            # snapshot held: groups it made ready, groups another claim held, groups it
            # parked, or completions it settled (their groups' slots were still taken in
            # its snapshot: without another claim, a worker whose groups were all at
            # their caps slept poll_max with nothing left to wake it).
            again = again or (
                len(rows) < room
                and (claim.woken > 0 or claim.busy > 0 or claim.parked > 0 or bool(claim.settled))
            )
            taken += turns.served(kind, await self._started(rows, start))
            # Slow in a backlog: the groups' statistics may be stale (test_claim_statistics).
            await self.statistics.after_grouped_claim(conn, self._grouped_backlog, took)
        return taken, again, done

    async def _started(self, rows: list[Record], start: Callable[[list[Record]], None]) -> int:
        """Every claim's tail: count the rows, start their runs, let them take their first
        step; how many were claimed."""
        self._count(rows)
        start(rows)
        await let_them_start(rows)
        return len(rows)

    def _room(self, kind: str, free: int, releasing: int = 0) -> int:
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

    def _count(self, rows: list[Record]) -> None:
        """Count a claim: its rows spend tokens (``start`` takes their slots)."""
        for row in rows:
            if (bucket := self.buckets.get(row["kind"])) is not None:
                bucket.spend(1)
        self.stats["claimed"] += len(rows)
        if rows:
            self._due_again = 0
        else:
            self.stats["empty_claims"] += 1
        if self._m:
            self._m.claims.inc()
            if not rows:
                self._m.empty_claims.inc()
            for row in rows:
                self._m.claimed.labels(row["kind"]).inc()
                self._m.pickup_seconds.labels(row["kind"]).observe(max(0.0, row["waited"]))

    async def until_next_visible(self, conn: Conn) -> float:
        """Seconds until the next job the worker could claim now becomes visible, at
        most ``poll_max``; 0 when one is already due.

        The claim read now() when it began: a job whose ``visible_at`` passed since is
        due yet was not claimed, so the lookup keeps due jobs and the loop claims again.
        It asks only about kinds a claim would take now, else a due job of a kind at its
        cap or out of tokens would keep the loop claiming in vain.
        """
        now = time.monotonic()
        kinds = self.claimable_now(now)
        if not kinds:
            return self.poll_max
        found = await db.claims.job_next_visible_at(
            conn, schema=self.schema, kinds=kinds, all_kinds=self.kinds
        )
        was, self.grouped = self.grouped, self.declared_grouped | found.grouped_kinds
        if self.grouped - was:
            return 0.0  # kinds with groups first seen: claim their grouped jobs now
        self.timers_at = now
        nxt, timer = found.visible_at, found.timer_at
        # A group's next wake-up: a bucket's next token, a group resumed.
        if found.group_wake_at is not None and (nxt is None or found.group_wake_at < nxt):
            nxt = found.group_wake_at
        if timer is not None and timer <= datetime.now(timer.tzinfo):
            # A waiting workflow's timer is due: make it pending (its notification wakes
            # this loop and the others), here rather than in every claim.
            # None woken: another worker holds them; back off below as for a locked job.
            if await db.workflow.job_wake_due(conn, schema=self.schema, kinds=kinds):
                self._due_again = 0
                return 0.0
        if timer is not None and (nxt is None or timer < nxt):
            nxt = timer
        due = self.poll_max if nxt is None else (nxt - datetime.now(nxt.tzinfo)).total_seconds()
        if due > 0:
            self._due_again = 0
            return min(self.poll_max, due)
        # Due now: claim again at once. A due job the claims keep skipping is a row
        # locked by someone else (a claim in progress, an open transaction): back off,
        # doubling, rather than spin for as long as the lock is held.
        self._due_again += 1
        if self._due_again == 1:
            return 0.0
        return min(self.poll_max, db.errors.ERROR_BACKOFF.delay(self._due_again - 1))

    async def wake_due_timers(self, conn: Conn) -> None:
        """Wake the due timers of this worker's kinds if nothing looked for them for
        ``poll_max``: while its claims keep filling every slot (a backlog),
        ``until_next_visible`` never runs, and a sleeping workflow must not wait for the
        backlog to drain. Called by the recovery's timer, beside the loop: one statement
        per ``poll_max`` while the loop is busy, hardly any while it idles."""
        now = time.monotonic()
        if now - self.timers_at < self.poll_max:
            return
        self.timers_at = now
        await db.workflow.job_wake_due(conn, schema=self.schema, kinds=self.kinds)

    async def look_for_groups(self, conn: Conn) -> bool:
        """Ask which of this worker's other kinds have groups now; whether some have.
        ``until_next_visible`` finds them, but only when the loop idles: while claims
        fill every slot (a backlog of any kind), a grouped job of a kind that declares no
        group limit waited for the whole backlog (the claim of jobs without a group never
        sees a grouped row). Called by the recovery's timer, beside the loop (its pace:
        about once a second): the set is replaced, never changed in place, under a loop
        that may be iterating it."""
        if unknown := [k for k in self.kinds if k not in self.grouped]:
            found = await db.groups.group_kinds(conn, schema=self.schema, kinds=unknown)
            if found - self.grouped:
                self.grouped = self.grouped | found
                return True
        return False


def _completions(done: list[Run]) -> list[tuple[int, int, str | None]]:
    """The finished runs as a claim settles them: id, the attempt it ran under, result."""
    return [(r.id, r.attempt, r.result()) for r in done]
