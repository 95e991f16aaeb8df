"""The grouped runs' check of the chaos soak (docs/chaos.md, "Groups in the soak"): from
the ledger's entry and exit records (``tests/chaos/ledger.py``), no instant at which a
group ran more jobs than its cap, with the cap in force for the claims running then;
zombies (a run going on after its lease ran out and its job was recovered) reported apart;
and every slot a SIGKILLed worker held freed within its lease plus the recovery interval.

A run's interval is [its entry, its exit]. Both lie inside its claim (the entry is written
after the claim committed, the exit before the run returns, hence before its settle), so
more intervals at once than the cap means more claims at once than the cap: an overshoot.
The one exception is a run whose claim was recovered under it (``stale-recovered``): from
the recovery on it no longer holds a slot, so its interval counts up to the recovery and
the rest is a **zombie tail**, counted apart, and only if the recovery came after the
claim's lease ended (else the recovery itself is the violation). A run with no exit record
ends at its run file's E line (its exit never landed), its Q line (cancelled at a
shutdown, written before the worker releases the job), or its process's death.

The cap in force: a group's cap is the task's ``group_cap`` until the harness lowers it
with ``venturi.set_group`` at ``CapChange.at`` (the database's clock, read in the same
transaction after the change was written, so no claim can lock the group's row between
the two). SPEC 13: running jobs finish, and nothing new is claimed in that group until it
is under the new cap. So at an instant the bound is the cap in force when the latest
claim among the running ones was made: a claim made under the lowered cap joined at most
that many, and only ends came after it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from . import records

# The slack on a slot's freeing beyond lease + recovery interval: the recovery statement
# itself, the harness's timing of the kill, a busy 2-core host.
FREE_SLACK = 2.0


@dataclass
class Record:
    """One ledger row; times in seconds since the epoch (the database's clock)."""

    job: int
    attempt: int
    phase: str  # "S" entry, "E" exit
    pid: int
    kind: str
    grp: str
    at: float
    token: str | None = None
    claimed_at: float | None = None
    expires_at: float | None = None


@dataclass
class CapChange:
    kind: str
    grp: str
    at: float
    cap: int


@dataclass
class Interval:
    job: int
    attempt: int
    pid: int
    kind: str
    grp: str
    start: float
    end: float
    ended_by: str  # "exit", "E line", "cancel", "death", "claim end"
    claimed_at: float
    token: str | None
    counted_end: float = 0.0  # the end, or the recovery of a zombie
    zombie: bool = False

    def describe(self) -> str:
        return (
            f"job {self.job} attempt {self.attempt} pid {self.pid} token {self.token} "
            f"claimed {self.claimed_at:.3f} entry {self.start:.3f} "
            f"{self.ended_by} {self.end:.3f}" + (" (zombie)" if self.zombie else "")
        )


@dataclass
class Report:
    intervals: int = 0
    ended_by: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # (kind, group) -> the most runs at once, and the cap they were held to then.
    peaks: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # (kind, group) -> the most runs at once held to a lowered cap (claims after it).
    lowered_peaks: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    overshoots: int = 0
    zombies: int = 0
    zombie_tails: list[float] = field(default_factory=list)
    zombie_over_cap: int = 0  # instants over the cap only with zombie tails counted
    entries_after_claim_end: int = 0
    tokens: int = 0
    slot_frees: list[float] = field(default_factory=list)  # SIGKILL -> claim recovered
    free_bounds: list[float] = field(default_factory=list)
    next_claims: list[float] = field(default_factory=list)  # SIGKILL -> next claim in group
    violations: list[str] = field(default_factory=list)


def intervals_of(
    records: list[Record],
    lines: list[str],
    claims: dict[int, dict[int, records.Claim]],
    deaths: dict[int, float],
    rep: Report,
) -> list[Interval]:
    """Every run with an entry record, ended as the module's docstring says."""
    exits = {(r.job, r.attempt): r.at for r in records if r.phase == "E"}
    e_lines: dict[tuple[int, int], float] = {}
    q_lines: dict[tuple[int, int], float] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 6 or parts[0] not in ("E", "Q"):
            continue
        try:
            key, t = (int(parts[1]), int(parts[2])), float(parts[5])
        except ValueError:
            continue
        (e_lines if parts[0] == "E" else q_lines).setdefault(key, t)
    out: list[Interval] = []
    for r in records:
        if r.phase != "S":
            continue
        key = (r.job, r.attempt)
        claim = claims.get(r.job, {}).get(r.attempt)
        claim_end = claim.end.at if claim is not None and claim.end is not None else None
        ends = [
            ("exit", exits.get(key)),
            ("E line", e_lines.get(key)),
            ("cancel", q_lines.get(key)),
            ("death", deaths.get(r.pid)),
            ("claim end", claim_end),
        ]
        found = [(by, t) for by, t in ends if t is not None]
        if not found:
            rep.violations.append(
                f"group {r.kind}/{r.grp}: job {r.job} attempt {r.attempt}: "
                "an entry with no end (no exit, no line, no death)"
            )
            continue
        ended_by, end = found[0]
        claimed_at = r.claimed_at or (claim.at if claim is not None else r.at)
        iv = Interval(r.job, r.attempt, r.pid, r.kind, r.grp, r.at, end, ended_by, claimed_at,
                      r.token, end)  # fmt: skip
        rep.ended_by[ended_by] += 1
        if r.token is None:
            rep.entries_after_claim_end += 1
        _zombie(iv, claim, r, rep)
        out.append(iv)
    rep.intervals = len(out)
    return out


def _zombie(iv: Interval, claim: records.Claim | None, r: Record, rep: Report) -> None:
    """Cut a recovered run's interval at its recovery; check the lease had ended."""
    end = claim.end if claim is not None else None
    if end is None or end.event != "stale-recovered" or end.at >= iv.end:
        return
    expires = r.expires_at
    if expires is not None and end.at < expires:
        rep.violations.append(
            f"group {iv.kind}/{iv.grp}: job {iv.job} attempt {iv.attempt} recovered at "
            f"{end.at:.3f}, before its lease ended ({expires:.3f}), while its run went on"
        )
        return
    iv.zombie = True
    iv.counted_end = max(iv.start, end.at)
    rep.zombies += 1
    rep.zombie_tails.append(iv.end - iv.counted_end)


def _cap_at(changes: list[CapChange], default: int, at: float) -> int:
    cap = default
    for c in changes:
        if c.at <= at:
            cap = c.cap
    return cap


def sweep(
    intervals: list[Interval],
    caps: dict[str, int],
    changes: list[CapChange],
    rep: Report,
) -> None:
    """Every instant a run starts: no more runs of its group than the cap in force."""
    by_group: dict[tuple[str, str], list[Interval]] = defaultdict(list)
    for iv in intervals:
        by_group[(iv.kind, iv.grp)].append(iv)
    for (kind, grp), ivs in sorted(by_group.items()):
        mine = sorted((c for c in changes if c.kind == kind and c.grp == grp), key=lambda c: c.at)
        lowered = mine[0].at if mine else None
        for with_tails in (False, True):
            points = []
            for iv in ivs:
                stop = iv.end if with_tails else iv.counted_end
                if stop > iv.start:
                    points += [(iv.start, 1, iv), (stop, 0, iv)]
            running: dict[int, Interval] = {}
            reported: set[frozenset[int]] = set()
            peak, peak_cap, low, low_cap = 0, caps[kind], 0, 0
            for _, starts, iv in sorted(points, key=lambda p: (p[0], p[1], p[2].job)):
                if not starts:
                    running.pop(id(iv), None)
                    continue
                running[id(iv)] = iv
                latest = max(x.claimed_at for x in running.values())
                bound = _cap_at(mine, caps[kind], latest)
                n = len(running)
                if n > peak:
                    peak, peak_cap = n, bound
                if lowered is not None and latest >= lowered and n > low:
                    low, low_cap = n, bound
                if n <= bound:
                    continue
                ids = frozenset(x.job for x in running.values())
                if ids in reported:
                    continue
                reported.add(ids)
                if with_tails:
                    rep.zombie_over_cap += 1
                    continue
                rep.overshoots += 1
                rep.violations.append(
                    f"group {kind}/{grp}: {n} runs at {iv.start:.3f}, over its cap {bound}: "
                    + "; ".join(x.describe() for x in running.values())
                )
            if not with_tails:
                rep.peaks[(kind, grp)] = (peak, peak_cap)
                if lowered is not None:
                    rep.lowered_peaks[(kind, grp)] = (low, low_cap)


def slots_freed(
    claims: dict[int, dict[int, records.Claim]],
    groups: dict[int, tuple[str, str]],
    faults: records.Faults,
    windows: list[tuple[float, float]],
    leases: dict[str, float],
    recover_every: float,
    rep: Report,
) -> None:
    """Every grouped claim a SIGKILLed worker held ended (its slot freed) within its lease
    plus the recovery interval (plus FREE_SLACK and the fault windows in between; a
    black-hole for good, open-ended, cuts one worker off and delays no other's recovery)."""
    starts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for job, cs in claims.items():
        for c in cs.values():
            starts[groups[job]].append(c.at)
    for v in starts.values():
        v.sort()
    for job, cs in sorted(claims.items()):
        kind, grp = groups[job]
        for c in cs.values():
            killed = faults.kills.get(c.pid, faults.crashes.get(c.pid))
            if killed is None or c.at > killed or (c.end is not None and c.end.at < killed):
                continue
            if c.end is None:
                rep.violations.append(
                    f"group {kind}/{grp}: job {job} attempt {c.attempt}: "
                    f"its worker died at {killed:.3f}, its slot never freed"
                )
                continue
            bound = leases[kind] + recover_every + FREE_SLACK
            bound += sum(
                min(b, killed + bound) - max(a, killed)
                for a, b in windows
                if a < killed + bound and b > killed and b != float("inf")
            )
            took = c.end.at - killed
            rep.slot_frees.append(took)
            rep.free_bounds.append(bound)
            if took > bound:
                rep.violations.append(
                    f"group {kind}/{grp}: job {job} attempt {c.attempt}: its slot was freed "
                    f"{took:.2f} s after its worker died, past {bound:.2f} s "
                    f"({c.end.event} at {c.end.at:.3f})"
                )
            after = [t for t in starts[(kind, grp)] if t > killed]
            if after:
                rep.next_claims.append(after[0] - killed)


def check(
    records: list[Record],
    lines: list[str],
    claims: dict[int, dict[int, records.Claim]],
    groups: dict[int, tuple[str, str]],
    faults: records.Faults,
    deaths: dict[int, float],
    *,
    windows: list[tuple[float, float]],
    caps: dict[str, int],
    changes: list[CapChange],
    leases: dict[str, float],
    recover_every: float,
) -> Report:
    """The whole check; ``claims``: each grouped job's claims (``records.claims_of``);
    ``groups``: job -> (kind, group); ``deaths``: pid -> when its process ended;
    ``windows``: the faults' windows (a restart, writes refused, a failover, the slow
    minute), which may hold up a recovery."""
    rep = Report()
    tokens: dict[int, set[str]] = defaultdict(set)
    for r in records:
        if r.token is not None:
            tokens[r.pid].add(r.token)
    rep.tokens = sum(len(t) for t in tokens.values())
    for pid, ts in tokens.items():
        if len(ts) > 1:
            rep.violations.append(f"pid {pid}: {len(ts)} claim tokens, not one per worker run")
    ivs = intervals_of(records, lines, claims, deaths, rep)
    sweep(ivs, caps, changes, rep)
    slots_freed(claims, groups, faults, windows, leases, recover_every, rep)
    return rep


def rows(rep: Report, enqueued: dict[str, int], changes: list[CapChange]) -> list[tuple[str, Any]]:
    """The summary's rows."""

    def spread(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"{len(xs)}: p50 {statistics.median(xs):.2f} s, max {max(xs):.2f} s"

    # The groups first seen (groupload.NEW_GROUP, one a burst) in one entry: their peak,
    # and how many there were.
    folded: dict[tuple[str, str], tuple[int, int]] = {}
    new: dict[str, int] = defaultdict(int)
    for (kind, grp), (p, c) in rep.peaks.items():
        key = (kind, "new*" if grp.startswith("new") else grp)
        folded[key] = max(folded.get(key, (p, c)), (p, c))
        new[kind] += grp.startswith("new")
    peaks = ", ".join(
        f"{k[0][6:]}/{k[1]}{f' ({new[k[0]]} groups)' if k[1] == 'new*' else ''} {p}/{c}"
        for k, (p, c) in sorted(folded.items())
    )
    lowered = ", ".join(
        f"{c.kind[6:]}/{c.grp} to {c.cap}: peak {rep.lowered_peaks.get((c.kind, c.grp), (0, 0))[0]}"
        for c in changes
    )
    return [
        ("grouped jobs enqueued", ", ".join(f"{k} {n}" for k, n in sorted(enqueued.items()))),
        ("grouped runs in the ledger (ended by)",
         f"{rep.intervals} ({', '.join(f'{k} {n}' for k, n in sorted(rep.ended_by.items()))})"),
        ("claim tokens seen (one per worker run)", rep.tokens),
        ("peak runs at once per group / cap", peaks or "-"),
        ("caps lowered while running (peak of claims after it)", lowered or "-"),
        ("instants over a group's cap (overshoots)", rep.overshoots),
        ("zombies (ran on past a recovered lease) / longest tail",
         f"{rep.zombies} / {max(rep.zombie_tails, default=0.0):.2f} s"),
        ("instants over a cap counting zombie tails (apart)", rep.zombie_over_cap),
        ("entries written after the claim had ended", rep.entries_after_claim_end),
        ("grouped slots a SIGKILL held: freed after", spread(rep.slot_frees)),
        ("... bound (lease + recovery + slack + faults), least", f"{min(rep.free_bounds, default=0):.1f} s"),
        ("... next claim in that group after the SIGKILL", spread(rep.next_claims)),
    ]  # fmt: skip


def stranded(log: str) -> list[str]:
    """A worker log's lines saying its recovery timer found a group left out of the grouped
    claim (``group_wake_stranded``) and woke it: each a bug of the claim, however the
    group's jobs then ended."""
    return [line[:600] for line in log.splitlines() if "neither ready nor due a wake-up" in line]
