"""The end-of-run history check of the chaos soak, as pure functions over plain data
(``tests/chaos/records.py``).

Three sources, each written by a different party, are cross-checked:

- the database: every job row and every journal row (written by the workers' settles);
- the run records: one start line per handler run, and one end line with what the
  handler returned, written by the handler itself (``tests/chaos/tasks.py``);
- the fault log: which worker process the harness SIGKILLed or SIGTERMed and when, and
  when it cut the database connections or restarted PostgreSQL.

What must hold (each failure is a violation with the job it concerns):

1. No job is lost: every id an enqueue returned exists; a job no enqueue returned exists
   only if its batch's commit was ambiguous (the harness then re-sent it).
2. No job is stuck: every job is ``completed`` or ``dead``, as its kind dictates.
3. The journal is complete: the claims of a job are attempts 1..attempt, each once, and
   each claim ended in exactly one event; ``failures`` equals the failure events.
4. Runs and claims match one to one: every handler run belongs to a journaled claim of
   the same attempt by the same process, no claim was run twice, and a claim without a
   run ended by an interruption (stale-recovered or released), never by a settle.
   Hence a job ran more than once only if the journal shows why: an interruption, or a
   pause / retry / failure its handler chose.
5. Every applied settle came from the claim's owner: the end event is by the claim's
   worker, agrees with what that run's handler returned, and names that claim in its
   payload (the completed result, the failed or dead detail, the carry's trail).
6. Every interruption has a cause the harness produced: a SIGKILL, a SIGTERM drain, a
   connection fault, a handler that outlived its lease; a lease that expired under a
   live, unfaulted worker is reported as a stall (allowed, but counted).
7. A per-kind cap held inside every worker process.

A workflow run that must wait ends its claim with ``waiting`` (its handler's end record
says ``wait``), a settle like the others; the ``woken`` that follows opens no claim and
ends none. The workflow checks proper are ``tests/chaos/workflows.py``.
"""

from __future__ import annotations

from collections import defaultdict

from .records import FAILURE_EVENTS, Claim, Event, Faults, Job, Report, Run, claims_of, pid_of

# How a claim ended, besides a settle its handler chose.
INTERRUPTIONS = ("stale-recovered", "released")
# What the run's end record must say for each settle event.
SETTLED_BY = {
    "completed": {"complete"},
    "paused": {"pause", "pause-cancel"},
    "retried": {"retry"},
    "failed": {"raise", "raise-db"},
    "dead": {"dead"},
    # A workflow run that must wait (a timer, a signal, children, dependencies).
    "waiting": {"wait"},
}
TRAIL_WHY = {"pause": "step", "pause-cancel": "cancel", "retry": "retry"}

# Re-run reasons, in the order the summary prints them.
REASONS = (
    "SIGKILL",
    "handler outlived its lease (no renewal)",
    "connection loss (terminate / restart)",
    "SIGTERM: released after shutdown_timeout",
    "SIGTERM: cooperative pause",
    "SIGTERM: unsettled at exit",
    "lease expired under a live worker (stall)",
    "worker crashed (a bug)",
    "lease expired under a renewing handler",
)


def check(
    jobs: list[Job],
    events: list[Event],
    runs: list[Run],
    faults: Faults,
    *,
    enqueued: dict[int, int],
    ambiguous_seqs: set[int],
    expected: dict[str, str],
    leases: dict[str, float],
    caps: dict[str, int],
    renewing: frozenset[str] = frozenset(),
    spawned: set[int] | frozenset[int] = frozenset(),
) -> Report:
    """Check the whole history; ``enqueued`` maps every id an enqueue returned to its seq;
    ``spawned`` holds the jobs a workflow spawned (no enqueue of the harness returns
    them: ``workflows.check`` checks each against its parent's record)."""
    rep = Report(jobs=len(jobs))
    by_id = {j.id: j for j in jobs}
    events_of: dict[int, list[Event]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.at):
        events_of[e.job].append(e)
    runs_of: dict[int, list[Run]] = defaultdict(list)
    for r in runs:
        runs_of[r.job].append(r)
    rep.runs = len(runs)

    # 1. Nothing lost, nothing from nowhere.
    for job_id in sorted(set(enqueued) - set(by_id)):
        rep.lost += 1
        rep.violate(f"job {job_id} (seq {enqueued[job_id]}): enqueued, and gone from the table")
    for job in jobs:
        if job.id not in enqueued and job.id not in spawned:
            seq = job.carry.get("seq") if isinstance(job.carry, dict) else None
            if seq in ambiguous_seqs:
                rep.phantoms += 1
            else:
                rep.violate(f"job {job.id}: in the table, but no enqueue returned it")
    for job_id in sorted(set(runs_of) - set(by_id)):
        rep.violate(f"job {job_id}: a handler ran it, but it is not in the table")

    for job in jobs:
        runs_here = runs_of.get(job.id, [])
        _check_job(job, events_of.get(job.id, []), runs_here, faults, rep, expected, leases,
                   job.kind in renewing)  # fmt: skip
    _check_caps(runs, faults, caps, rep)
    return rep


def _check_job(
    job: Job,
    events: list[Event],
    runs: list[Run],
    faults: Faults,
    rep: Report,
    expected: dict[str, str],
    leases: dict[str, float],
    renews: bool = False,
) -> None:
    rep.statuses[job.status] += 1
    where = f"job {job.id} ({job.kind}{'' if job.grp is None else f', group {job.grp}'})"
    # A job not final, or a journal that does not parse into claims, leaves nothing the
    # later checks could stand on.
    if not _check_final(job, where, rep, expected):
        return
    claims = _check_journal(job, events, where, rep)
    if claims is None:
        return
    _match_runs(claims, runs, where, rep)
    lease = leases.get(job.kind, 0.0)
    trail = _check_ends(job, claims, faults, where, rep, lease, renews)
    _check_payloads(job, trail, where, rep)
    _count_long_runs(job, claims, faults, rep, lease, renews)


def _check_final(job: Job, where: str, rep: Report, expected: dict[str, str]) -> bool:
    """2. Final, and as the handler dictates; False: stuck, nothing more to check."""
    if job.status not in ("completed", "dead"):
        rep.stuck += 1
        rep.violate(f"{where}: stuck {job.status} (attempt {job.attempt})")
        return False
    want = expected.get(job.kind)
    if want is not None and job.status != want:
        rep.violate(f"{where}: {job.status}, its handler dictates {want}: {job.last_error!r}")
    return True


def _check_journal(
    job: Job, events: list[Event], where: str, rep: Report
) -> dict[int, Claim] | None:
    """3. The journal is complete and consistent; its claims, or None if ``claims_of``
    refused it (a claim journaled twice, an end with no claim or a second end)."""
    try:
        claims = claims_of(job, events)
    except ValueError as exc:
        rep.violate(f"{where}: {exc}")
        return None
    rep.claims += len(claims)
    if sorted(claims) != list(range(1, job.attempt + 1)):
        rep.violate(f"{where}: claims {sorted(claims)} do not cover attempts 1..{job.attempt}")
    failures = sum(1 for e in events if e.event in FAILURE_EVENTS)
    if failures != job.failures:
        rep.violate(f"{where}: failures = {job.failures}, journal shows {failures}")
    for c in claims.values():
        if c.end is None:
            rep.violate(f"{where}: claim {c.attempt} by {c.worker} never ended")
    return claims


def _match_runs(claims: dict[int, Claim], runs: list[Run], where: str, rep: Report) -> None:
    """4. Runs and claims, one to one: each run is set on the claim it belongs to."""
    for r in runs:
        held = claims.get(r.attempt)
        if held is None:
            rep.violate(f"{where}: pid {r.pid} ran attempt {r.attempt}, which was never claimed")
        elif held.pid != r.pid:
            rep.violate(f"{where}: pid {r.pid} ran attempt {r.attempt}, claimed by {held.worker}")
        elif held.run is not None:
            rep.violate(f"{where}: attempt {r.attempt} ran twice under one claim")
        else:
            held.run = r
    if len(runs) > 1:
        rep.multi_run_jobs += 1


def _check_ends(
    job: Job,
    claims: dict[int, Claim],
    faults: Faults,
    where: str,
    rep: Report,
    lease: float,
    renews: bool,
) -> list[str]:
    """How each claim ended, in attempt order: a claim without a run only by an
    interruption (4), an interruption with its cause counted (6), a settle by its owner as
    its handler returned (5). Returns the trail the owners' settles wrote to the carry."""
    trail: list[str] = []
    for a in sorted(claims):
        c = claims[a]
        end = c.end
        if end is None:
            continue
        if c.run is None:
            if end.event not in INTERRUPTIONS:
                rep.violate(f"{where}: claim {a} ended {end.event} but no handler ran it")
            else:
                reason = _reason(c, end, faults, lease, renews)
                rep.unrun_claims[reason] += 1
                rep.example("not run: " + reason, job, c, end)
            continue
        run = c.run
        if end.event in INTERRUPTIONS:
            reason = _reason(c, end, faults, lease, renews)
            rep.reruns[reason] += 1
            rep.example(reason, job, c, end)
            if end.event == "released" and c.pid not in faults.terms:
                rep.violate(f"{where}: claim {a} released by {c.worker}, never sent SIGTERM")
            killed = faults.kills.get(c.pid)
            if run.outcome is not None and not (killed is not None and killed <= end.at):
                # The handler finished in a live worker after losing its claim: its settle
                # was refused (the payload checks below prove it was not applied).
                rep.late_settles += 1
            continue
        # 5. A settle: by the owner, as its handler returned, naming the claim.
        if end.worker != c.worker:
            rep.violate(f"{where}: claim {a} of {c.worker} settled {end.event} by {end.worker}")
            continue
        allowed = SETTLED_BY.get(end.event)
        if allowed is None or run.outcome not in allowed:
            rep.violate(
                f"{where}: claim {a} settled {end.event}, its handler ended {run.outcome!r}"
            )
            continue
        tag = f"attempt={a} pid={c.pid}"
        if end.event in ("failed", "retried", "dead") and tag not in (end.detail or ""):
            rep.violate(f"{where}: {end.event} detail {end.detail!r:.120} does not name {tag}")
        if run.outcome in TRAIL_WHY:
            trail.append(f"{a}:{c.pid}:{TRAIL_WHY[run.outcome]}")
        if run.outcome == "pause-cancel":
            if c.pid not in faults.terms:
                rep.violate(f"{where}: claim {a} paused for a shutdown nobody asked for")
            rep.reruns["SIGTERM: cooperative pause"] += 1
    return trail


def _check_payloads(job: Job, trail: list[str], where: str, rep: Report) -> None:
    """5. Payloads: the completed result and the carry name the claims that wrote them."""
    if job.status == "completed" and job.claimed_by:
        want_result = {"a": job.attempt, "p": pid_of(job.claimed_by)}
        if job.result != want_result:
            rep.violate(f"{where}: result {job.result!r} is not from its last claim {want_result}")
    got_trail = job.carry.get("trail", []) if isinstance(job.carry, dict) else []
    if got_trail != trail:
        rep.violate(f"{where}: carry trail {got_trail} != the settles of its owners {trail}")


def _count_long_runs(
    job: Job,
    claims: dict[int, Claim],
    faults: Faults,
    rep: Report,
    lease: float,
    renews: bool,
) -> None:
    """Count, for the summary (no violations), the long runs whose first claim ran:
    ``chaos_renewed`` ones whose first claim was neither paused at a SIGTERM nor
    interrupted other than by its lease expiring as it renewed, and ``chaos_overrun`` ones
    whose first claim was stale-recovered for outliving its lease; of each, how many had
    two claims or more that ran."""
    if job.kind == "chaos_renewed":
        first = claims.get(1)
        if first is not None and first.run is not None and first.end is not None:
            cut = (
                first.end.event in INTERRUPTIONS
                and _reason(first, first.end, faults, lease, renews)
                != "lease expired under a renewing handler"
            )
            if not cut and first.run.outcome != "pause-cancel":
                rep.renewed_jobs += 1
                rep.renewed_twice += sum(1 for c in claims.values() if c.run) >= 2
    if job.kind == "chaos_overrun":
        first = claims.get(1)
        if first is not None and first.run is not None and first.end is not None:
            outlived = "handler outlived its lease (no renewal)"
            if (
                first.end.event == "stale-recovered"
                and _reason(first, first.end, faults, lease, renews) == outlived
            ):
                rep.overrun_jobs += 1
                rep.overrun_twice += sum(1 for c in claims.values() if c.run) >= 2


def _reason(c: Claim, end: Event, faults: Faults, lease: float, renews: bool = False) -> str:
    """Why a claim was interrupted, from what the harness did and what the handler did."""
    if end.event == "released":
        return "SIGTERM: released after shutdown_timeout"
    killed = faults.kills.get(c.pid)
    if killed is not None and killed <= end.at:
        return "SIGKILL"
    crashed = faults.crashes.get(c.pid)
    if crashed is not None and crashed <= end.at + 1:
        return "worker crashed (a bug)"
    termed = faults.terms.get(c.pid)
    termed = termed if termed is not None and termed <= end.at else None
    faulted = any(start <= end.at and stop >= c.at for start, stop in faults.connection)
    run = c.run
    if run is not None and lease and termed is None:
        if run.end is None or run.end >= c.at + lease:
            if not renews:
                return "handler outlived its lease (no renewal)"
            if not faulted:
                return "lease expired under a renewing handler"
    if faulted:
        # A fault between the claim and its recovery can have cost the settle (or the
        # renewal) its lease.
        return "connection loss (terminate / restart)"
    if termed is not None:
        return "SIGTERM: unsettled at exit"
    return "lease expired under a live worker (stall)"


def _check_caps(runs: list[Run], faults: Faults, caps: dict[str, int], rep: Report) -> None:
    """7. Per process and capped kind, handler runs never overlapped beyond the cap."""
    spans: dict[tuple[int, str], list[tuple[float, int]]] = defaultdict(list)
    for r in runs:
        if r.kind not in caps:
            continue
        # A run with no end was killed with its process, or cancelled at a shutdown.
        stop = r.end if r.end is not None else faults.kills.get(r.pid, r.start)
        spans[(r.pid, r.kind)] += [(r.start, 1), (stop, -1)]
    for (pid, kind), points in spans.items():
        level = peak = 0
        for _, delta in sorted(points, key=lambda p: (p[0], p[1])):
            level += delta
            peak = max(peak, level)
        if peak > caps[kind]:
            rep.violate(f"pid {pid}: {peak} runs of {kind} at once, over its cap {caps[kind]}")
