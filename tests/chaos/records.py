"""The records the chaos soak's history check reads, as plain data: the job rows, the
journal's events, the handlers' run records (start and end lines written by the handlers,
``tests/chaos/tasks.py``), the harness's faults, and the claims they make up together;
with the report the check fills. ``tests/chaos/history.py`` holds the check."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

FAILURE_EVENTS = ("failed", "retried", "timed-out", "stale-recovered")
# Journal rows that neither open nor end a claim: a waiting job woken (by a signal, a
# timer, the end of what it awaited) is journaled under the attempt that waited, or 0
# for a Workflow node never claimed yet.
NOT_CLAIM_EVENTS = ("enqueued", "woken")


@dataclass
class Job:
    id: int
    kind: str
    status: str
    carry: dict[str, Any]
    attempt: int
    failures: int
    max_failures: int
    claimed_by: str | None
    claimed_at: float | None
    finished_at: float | None
    result: Any
    last_error: str | None
    grp: str | None = None  # its group (SPEC 13), named in a violation


@dataclass
class Event:
    job: int
    at: float
    event: str
    attempt: int
    worker: str | None
    detail: str | None


@dataclass
class Run:
    job: int
    attempt: int
    pid: int
    kind: str
    start: float
    end: float | None = None
    outcome: str | None = None


@dataclass
class Faults:
    kills: dict[int, float] = field(default_factory=dict)  # pid -> SIGKILL time
    terms: dict[int, float] = field(default_factory=dict)  # pid -> SIGTERM time
    connection: list[tuple[float, float]] = field(default_factory=list)  # fault windows
    crashes: dict[int, float] = field(default_factory=dict)  # pid -> seen dead on its own


@dataclass
class Claim:
    attempt: int
    worker: str
    at: float
    end: Event | None = None
    run: Run | None = None
    backstop: bool = False

    @property
    def pid(self) -> int:
        return pid_of(self.worker)


@dataclass
class Report:
    jobs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    stuck: int = 0
    phantoms: int = 0
    runs: int = 0
    claims: int = 0
    reruns: Counter[str] = field(default_factory=Counter)
    unrun_claims: Counter[str] = field(default_factory=Counter)
    late_settles: int = 0  # handlers that finished after losing their claim
    overrun_jobs: int = 0
    overrun_twice: int = 0
    renewed_jobs: int = 0  # renewing long runs not interrupted by a harness fault
    renewed_twice: int = 0
    multi_run_jobs: int = 0
    violations: list[str] = field(default_factory=list)
    # A few interrupted claims per reason, for the log: what happened when.
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def example(self, reason: str, job: Job, c: Claim, end: Event) -> None:
        if len(self.examples[reason]) < 5:
            run = c.run
            ran = "not run" if run is None else f"ran {run.start:.3f}..{run.end} -> {run.outcome}"
            self.examples[reason].append(
                f"job {job.id} ({job.kind}) attempt {c.attempt} claimed by {c.worker} at "
                f"{c.at:.3f}, {ran}; {end.event} at {end.at:.3f} by {end.worker}"
            )

    def violate(self, message: str) -> None:
        self.violations.append(message)


def pid_of(worker: str | None) -> int:
    if not worker:
        return -1
    try:
        return int(worker.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return -1


def parse_runs(lines: list[str]) -> list[Run]:
    """Run records from the lines the handlers wrote (a torn last line is skipped)."""
    runs: dict[tuple[int, int, int], list[Run]] = defaultdict(list)
    out: list[Run] = []
    ends: list[tuple[int, int, int, str, float]] = []
    for line in lines:
        parts = line.split()
        if len(parts) != 6:
            continue
        try:
            job, attempt, pid, t = int(parts[1]), int(parts[2]), int(parts[3]), float(parts[5])
        except ValueError:
            continue
        if parts[0] == "S":
            run = Run(job, attempt, pid, parts[4], t)
            runs[(job, attempt, pid)].append(run)
            out.append(run)
        elif parts[0] == "E":
            ends.append((job, attempt, pid, parts[4], t))
    for job, attempt, pid, outcome, t in ends:
        for run in runs.get((job, attempt, pid), []):
            if run.end is None:
                run.end, run.outcome = t, outcome
                break
    return out


def claims_of(job: Job, events: list[Event]) -> dict[int, Claim]:
    """The claims of a job, each with the event that ended it (or None: still running).

    Claims that ended other than by completion are journaled; the current or completed
    claim is on the row (as ``venturi.get_journal`` merges it).
    """
    claims: dict[int, Claim] = {}
    duplicates: list[int] = []
    for e in events:
        if e.event == "claimed":
            if e.attempt in claims:
                duplicates.append(e.attempt)
            claims[e.attempt] = Claim(e.attempt, e.worker or "?", e.at)
    if job.status in ("claimed", "completed") and job.claimed_by and job.claimed_at is not None:
        if job.attempt in claims:
            duplicates.append(job.attempt)
        claims[job.attempt] = Claim(job.attempt, job.claimed_by, job.claimed_at)
        if job.status == "completed":
            claims[job.attempt].end = Event(
                job.id,
                job.finished_at or job.claimed_at,
                "completed",
                job.attempt,
                job.claimed_by,
                None,
            )
    for e in events:
        if e.event == "claimed" or e.event in NOT_CLAIM_EVENTS:
            continue
        c = claims.get(e.attempt)
        if c is None:
            duplicates.append(-e.attempt)  # an end without a claim
        elif c.end is None:
            c.end = e
        elif e.event == "dead" and c.end.event in FAILURE_EVENTS and not c.backstop:
            c.backstop = True  # the failure that reached max_failures, then dead
        else:
            duplicates.append(-e.attempt)  # a second end of one claim
    if duplicates:
        raise ValueError(
            f"claims journaled twice or ended twice (negative: ends) {sorted(duplicates)}"
        )
    return claims


def decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)
