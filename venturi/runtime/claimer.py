"""Claim policy: which kinds a claim asks for, how many jobs, at which priority floor.

The claim filter is the registered kinds minus those at their cap or out of tokens
(``venturi.runtime.limits``). A batch never overshoots a cap or spends more tokens than
a local bucket holds. Kinds with a shared (database) rate limit are claimed on their
own, each in a transaction with its bucket, and so are kinds with a global cap, each in
a transaction that holds the kind's cap lock. Completions ride the claim: one statement
settles them and claims.
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
from venturi.runtime.config import KindPolicy, WorkerConfig
from venturi.runtime.inflight import let_them_start
from venturi.runtime.instruments import Instruments
from venturi.runtime.limits import Limits
from venturi.runtime.run import Run
from venturi.runtime.statistics import Statistics
from venturi.runtime.tiers import Tiers
from venturi.runtime.turns import Turns

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
        self.stats = instruments.stats
        self._m = instruments.prom
        self.limits = Limits(policies, occupied, config.poll_max)
        # Kinds whose grouped jobs this worker claims with job_claim_grouped (SPEC 13):
        # those that declare group limits, and those the database has groups of (found
        # by until_next_visible's lookup). Their jobs without a group go by the claims above.
        self.declared_grouped = {
            k for k, p in policies.items() if p.task.group_cap or p.task.group_rate
        }
        self.grouped = set(self.declared_grouped)
        self._first = {"grouped": False, "limited": False}  # see turn
        self.turns = {k: Turns(config.concurrency) for k in ("grouped", "shared", "capped")}
        # The last fill left a kind out for want of a local token (see fill).
        self.tokens_short = False
        # The last ordinary claim left a kind out by this worker's cap or local bucket:
        # coming back short, it did not show that the kind has nothing to claim.
        self.held_out = False
        # The best tier of each claim stream's last claim (the ordinary claim, each
        # grouped kind's), for the order of the claims of a fill (runtime/tiers.py).
        self.tiers = Tiers()
        self.limited_level, self.limited_peek = 0, False  # see limited_first
        # Claims made, per stream of claims (next_floor).
        self._claims: Counter[str] = Counter()
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

    def turn(self, claims: str) -> bool:
        """Whether ``claims`` go before the ordinary claim this time: every other time, so
        that neither's backlog keeps the other's jobs, however old, out of every slot.
        ``grouped``: the groups' claim; ``limited``: the claims of kinds with a shared
        rate or a global cap."""
        first = self._first[claims] = not self._first[claims]
        return first

    def claimable_now(self, now: float) -> list[str]:
        """Every kind a claim of any shape may try now (``Limits.claimable_now``)."""
        return self.limits.claimable_now(now, self.grouped)

    def next_floor(self, stream: str = "ordinary") -> int:
        """The priority floor of the next claim of ``stream`` (``venturi.priority.floor``):
        the ordinary claim, or one kind's claim of its own (``grouped:KIND``,
        ``shared:KIND``, ``capped:KIND``). Each keeps its own cadence: claims that take
        turns on one count fell in step with it, one getting every reserved claim and the
        other none."""
        self._claims[stream] += 1
        self.floor = floor(self._claims[stream], self.priority_ratio)
        return self.floor

    def limited_first(self, plain: bool = True) -> bool:
        """Whether the claims of the kinds with a shared rate or a global cap go before
        the ordinary claim: the better tier first, but in a turn ``priority_ratio``
        reserves for the lower (runtime/tiers.py), in turn within one."""
        tiers, now = self.tiers, time.monotonic()
        names = self.limits.live(now, frozenset(), plain)
        live, ordinary = [n for n in names if ":" in n], [n for n in names if ":" not in n]
        differ = tiers.differ(ordinary + live)
        self.limited_level = self.level("limited tiers") if differ else 0
        self.limited_peek = differ and self.priority_ratio is None and tiers.peek(now, "limited")
        first = tiers.goes_first(live, ordinary, self.limited_level, self.limited_peek)
        return self.turn("limited") if first is None else first

    def capped_first(self) -> bool:
        """Whether the global-cap kinds go before the shared-rate ones: the better tier."""
        live = self.limits.live(time.monotonic(), frozenset())
        return self.tiers.sort_first(
            live, "capped", "shared", self.limited_level, self.limited_peek
        )

    def _by_tier(self, sort: str, kinds: list[str]) -> list[str]:
        return self.tiers.kinds(sort, kinds, self.limited_level, self.limited_peek)

    def level(self, stream: str) -> int:
        """The floor of the next turn of ``stream`` (above HIGH: one ``priority_ratio``
        reserves for the lower tiers, ``venturi.priority.floor``), on a cadence of its
        own; the last claim's floor is left as it is."""
        self._claims[stream] += 1
        return floor(self._claims[stream], self.priority_ratio)

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
            kinds = [k for k in self.limits.claimable_kinds(releasing) if k not in left_out]
            # A kind its local bucket held out of this claim: if the bucket refills before
            # the loop asks how long to wait, token_wait() finds no wait, and the idle
            # lookup cannot see a job visible since its creation (jobs_next_visible_idx
            # holds only later ones): the loop must claim again, not sleep poll_max.
            self.tokens_short = any(b.available() < 1 for b in self.limits.buckets.values())
            self.held_out = len(kinds) < len([k for k in self.limits.ordinary if k not in left_out])
            if not kinds:
                break
            # A batch must not overshoot a cap nor spend more tokens than a bucket holds:
            # it is sized to the tightest room.
            limit = min(self.limits.room(k, free, releasing[k]) for k in kinds)
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
            self.tiers.saw("ordinary", rows, self.floor)
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
        taken, turns, limits = 0, self.turns["shared"], self.limits
        for kind in self._by_tier("shared", turns.order(limits.shared_claimable(time.monotonic()))):
            room = limits.room(kind, free - taken)
            if room < 1 or kind in left_out:
                continue
            rate = limits.shared[kind]
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
                floor=self.next_floor(f"shared:{kind}"),
            )
            limits.found(limits.shared_until, kind, wait)
            if not wait:
                self.tiers.saw(f"shared:{kind}", rows, self.floor)
            taken += turns.served(kind, await self._started(rows, start))
        return taken

    async def fill_capped(
        self, conn: Source, free: int, start: Callable[[list[Record]], None], left_out: Kinds
    ) -> int:
        """Claim kinds with a global cap, each in a transaction holding its cap lock (and
        within its shared bucket, if it has one); how many jobs were claimed. A kind
        found at its cap is left alone for ``limits.CAP_RECHECK`` seconds (another
        worker's settlement, which frees a place, sends no notification), or until this
        worker's own runs of it end (``Limits.places_freed``)."""
        taken, turns, limits = 0, self.turns["capped"], self.limits
        for kind in self._by_tier("capped", turns.order(limits.capped_claimable(time.monotonic()))):
            room = limits.room(kind, free - taken)
            if room < 1 or kind in left_out:
                continue
            rate = limits.shared.get(kind)
            global_cap = limits.global_caps[kind]
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
                floor=self.next_floor(f"capped:{kind}"),
            )
            full = limits.cap_recheck if held >= global_cap else 0.0
            limits.found(limits.capped_until, kind, max(wait, full))
            if not wait:
                self.tiers.saw(f"capped:{kind}", rows, self.floor)
            taken += turns.served(kind, await self._started(rows, start))
        return taken

    async def fill_grouped(
        self,
        conn: Source,
        free: int,
        start: Callable[[list[Record]], None],
        done: list[Run],
        completed: Callable[[list[Run], AbstractSet[int]], None],
        level: int = 0,
        peek: bool = False,
    ) -> tuple[int, bool, list[Run]]:
        """Claim the grouped jobs of each grouped kind (``db.groups.claim_grouped``), the
        completions ``done`` riding the first claim that runs (``completed`` hears which
        applied, as in ``fill``): how many were claimed, whether to claim again at once (a
        claim made groups ready, which its own snapshot could not take, or met groups
        another claim held), and the completions still to settle (no claim ran)."""
        taken, again, turns, limits = 0, False, self.turns["grouped"], self.limits
        now = time.monotonic()
        # The runs whose completions ride the first claim are over: their places under
        # this worker's cap are free (a kind at its cap was left out, and waited for the
        # idle lookup's recheck, half a second a place).
        releasing = Counter(r.task.kind for r in done)
        # The kinds by tier (``level``: a turn reserved for the lower ones; ``peek``: the
        # worst first, under strict priority, Tiers.peek), in turn.
        claimable = turns.order(limits.grouped_claimable(now, self.grouped, releasing))
        for kind in self.tiers.kinds("grouped", claimable, level, peek):
            policy = self.policies[kind]
            room = limits.room(kind, free - taken, releasing[kind] if done else 0)
            if room < 1 or limits.dry(kind, now):
                continue
            rate, group_rate = limits.shared.get(kind), policy.task.group_rate
            global_cap = limits.global_caps.get(kind)
            sent = time.monotonic()
            claim, wait = await db.groups.claim_grouped(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                kind=kind,
                lease=policy.lease,
                floor=self.next_floor(f"grouped:{kind}"),
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
            if not wait:
                self.tiers.saw(f"grouped:{kind}", claim.claimed, self.floor)
            rest = False  # found nothing to do (Limits.dry): not when no claim ran
            if wait:  # the kind's bucket was empty: no claim ran, done is still to settle
                limits.found(limits.grouped_until, kind, wait)
            else:
                completed(done, claim.settled)
                # Completions of this kind free its groups' slots: not a kind at rest.
                # (Other kinds' completions riding its claim say nothing of its groups.)
                rest = not (claim.settled and any(r.task.kind == kind for r in done))
                done = []
                if global_cap is not None and (claim.held or 0) >= global_cap:
                    limits.found(limits.capped_until, kind, limits.cap_recheck)
                # The claim may have spent the kind's last token: wait for the next.
                limits.found(limits.grouped_until, kind, claim.next_token)
            rows = claim.claimed
            # Claim again at once when this one came back short for a reason its own
            # snapshot held: groups it made ready, groups another claim held, groups it
            # parked, or completions it settled (their groups' slots were still taken in
            # its snapshot: without another claim, a worker whose groups were all at
            # their caps slept poll_max with nothing left to wake it).
            held = claim.woken > 0 or claim.busy > 0 or claim.parked > 0
            again = again or (len(rows) < room and (held or bool(claim.settled)))
            # Nothing to do: leave the kind until something says otherwise (Limits.dry), or
            # until its next wake-up is due (a busy loop asks no idle lookup: a job due
            # sooner waited out the rest).
            nothing = rest and not rows and not held
            until = limits.grouped_recheck
            if claim.next_wake is not None:
                until = min(until, max(claim.next_wake, 0.001))
            limits.found(limits.grouped_dry, kind, until if nothing else 0.0)
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

    def _count(self, rows: list[Record]) -> None:
        """Count a claim: its rows spend tokens (``start`` takes their slots)."""
        for row in rows:
            if (bucket := self.limits.buckets.get(row["kind"])) is not None:
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
            conn,
            schema=self.schema,
            kinds=kinds,
            all_kinds=self.kinds,
            resting=self.limits.resting(now),
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
        if found.groups_held:
            # A group at its cap holds a due job back: another worker's settlement frees
            # its slot without a notification. Look again soon, as at a global cap.
            due = min(due, self.limits.cap_recheck)
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

    async def advance_refills(self, conn: Conn) -> int:
        """Move forward the token wake-ups of this worker's grouped kinds that a slower
        ``group_rate`` put later than this worker's (a deploy raised or removed it; workers
        of the old rate still park groups at theirs): how many moved. Called by the
        recovery's timer with the loop's other looks."""
        rates = {}
        for kind in self.grouped:
            group_rate = self.policies[kind].task.group_rate
            rates[kind] = None if group_rate is None else group_rate.per_second
        return len(await db.groups.group_refill_advance(conn, schema=self.schema, rates=rates))


def _completions(done: list[Run]) -> list[tuple[int, int, str | None]]:
    """The finished runs as a claim settles them: id, the attempt it ran under, result."""
    return [(r.id, r.attempt, r.result()) for r in done]
