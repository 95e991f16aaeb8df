"""The chaos soak's workflow checks, as pure functions over plain data.

The soak runs workflows (``tests/chaos/tasks.py``: ``chaos_flow`` with its steps, a
durable sleep, a signal and two or three ``chaos_child`` children gathered; a three-node
``venturi.Workflow`` of ``chaos_node``) beside the plain jobs, under the same faults.
Besides the soak's history check (which covers every workflow run's claim, and reads a
``waiting`` end like any settle), these must hold:

- **recorded steps run again 0**: a step's function may run more than once before its
  record commits (at least once), never after: no ``X`` line (a start of the function)
  later than the first ``R`` line of that step (``ctx.step`` returned: its record had
  committed), or, when no run lived to write one, than the record's ``recorded_at``;
  a transactional step's write exists exactly once when recorded, never otherwise;
- **children spawned twice 0**: no two child rows of one parent and step name, and
  every child is the one its parent recorded;
- **signals lost 0**: every signal the database recorded (and every one the harness was
  told was recorded) was seen by its job (a ``G`` line with its payload), and the job
  went on to complete;
- **workflows stuck 0**: sampled while the soak runs, no waiting job whose wake
  condition held (a due timer, its signal sent, every awaited job ended) for longer than
  ``STUCK_BOUND`` seconds plus the fault windows it overlapped (each counted at most
  ``FAULT_CAP`` seconds: a black-hole of one worker is open-ended, and the other workers
  wake jobs meanwhile);
- **jobs lost 0**: the soak's own check, children and Workflow nodes included.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

STUCK_BOUND = 10.0
FAULT_CAP = 60.0


@dataclass
class Line:
    """A workflow record line (``tests/chaos/tasks.py``): X, R, G, C or N; or a run's
    end E (``what`` is then its attempt, ``value`` its outcome)."""

    tag: str
    job: int
    what: str
    pid: int
    value: str
    at: float


def parse_lines(lines: Sequence[str]) -> list[Line]:
    out: list[Line] = []
    for line in lines:
        parts = line.split()
        if len(parts) != 6 or parts[0] not in ("X", "R", "G", "C", "N", "E"):
            continue
        try:
            out.append(
                Line(parts[0], int(parts[1]), parts[2], int(parts[3]), parts[4], float(parts[5]))
            )
        except ValueError:
            continue  # a torn last line (a SIGKILL mid-write)
    return out


@dataclass
class StepRow:
    job: int
    name: str
    value: str
    recorded_at: float


@dataclass
class Child:
    id: int
    parent: int
    kind: str
    status: str
    name: str | None


@dataclass
class Effect:
    job: int
    step: str
    pid: int
    attempt: int


@dataclass
class Overdue:
    """A sample of the stuck monitor: job ``job`` waiting while ``why`` held for ``held``
    seconds, against its bound."""

    job: int
    kind: str
    why: str
    held: float
    bound: float


@dataclass
class Report:
    flows: int = 0
    flows_completed: int = 0
    nodes: int = 0
    workflows: int = 0  # three-node Workflows enqueued
    workflows_completed: int = 0  # their last node read both results and completed
    children: int = 0
    steps_recorded: int = 0  # the functions' steps (X/R), not timers or spawns
    step_fn_runs: int = 0
    step_fn_runs_before_commit: int = 0  # extra runs before the record committed
    steps_run_again: int = 0
    tx_writes: int = 0
    tx_writes_wrong: int = 0
    children_twice: int = 0
    children_unrecorded: int = 0
    gathers: int = 0  # gathers that returned every child's result
    children_gathered: int = 0
    signals_sent: int = 0  # the harness was told: recorded
    signals_refused: int = 0  # the harness was told: not recorded (sent before, finished)
    signals_recorded: int = 0  # in the signals table
    signals_delivered: int = 0  # seen by their job
    signals_lost: int = 0
    timers: int = 0
    runs_cut: int = 0  # workflow runs failed by a database error (a fault cut a statement)
    stuck: int = 0  # jobs seen overdue
    longest_held: float = 0.0  # the longest a wake condition held on a waiting job
    violations: list[str] = field(default_factory=list)

    def violate(self, message: str) -> None:
        self.violations.append(message)


def fault_overlap(windows: Sequence[tuple[float, float]], start: float, stop: float) -> float:
    """Seconds of ``windows`` (each capped at FAULT_CAP) inside [start, stop]."""
    total = 0.0
    for a, b in windows:
        b = min(b, a + FAULT_CAP)
        total += max(0.0, min(b, stop) - max(a, start))
    return total


def overdue(
    rows: Sequence[tuple[int, str, str, float | None, float]],
    windows: Sequence[tuple[float, float]],
) -> list[Overdue]:
    """The stuck monitor's rule over one sample of ``chaos_waiting_overdue`` (id, kind,
    why, since, now): every row, with how long its condition held and its bound."""
    out = []
    for job, kind, why, since, now in rows:
        start = now if since is None else since
        held = max(0.0, now - start)
        out.append(Overdue(job, kind, why, held, STUCK_BOUND + fault_overlap(windows, start, now)))
    return out


def check(
    *,
    kinds: dict[int, str],
    statuses: dict[int, str],
    lines: Sequence[Line],
    steps: Sequence[StepRow],
    effects: Sequence[Effect],
    children: Sequence[Child],
    signals: dict[int, str],
    sent: dict[int, bool | None],
    seqs: dict[int, int],
    workflows: Sequence[dict[str, int]],
    samples: Sequence[Overdue],
    transactional: frozenset[str] = frozenset({"in-transaction"}),
) -> Report:
    """``kinds`` / ``statuses``: every job by id; ``signals``: job -> payload recorded
    for the flows' signal; ``sent``: job -> what ``venturi.signal`` answered the harness
    (None: every try failed, the commit unknown); ``seqs``: a flow's seq (its signal's
    payload); ``workflows``: each Workflow's node ids by name; ``samples``: the stuck
    monitor's overdue rows."""
    rep = Report()
    rep.flows = sum(1 for k in kinds.values() if k == "chaos_flow")
    rep.flows_completed = sum(
        1 for j, k in kinds.items() if k == "chaos_flow" and statuses[j] == "completed"
    )
    rep.nodes = sum(1 for k in kinds.values() if k == "chaos_node")
    rep.children = sum(1 for k in kinds.values() if k == "chaos_child")
    rep.workflows = len(workflows)
    _check_steps(rep, lines, steps, effects, transactional)
    _check_children(rep, lines, steps, children)
    _check_signals(rep, kinds, statuses, lines, signals, sent, seqs)
    done = {ln.job for ln in lines if ln.tag == "N"}
    for nodes in workflows:
        c = nodes.get("c")
        if c is not None and statuses.get(c) == "completed" and c in done:
            rep.workflows_completed += 1
    rep.timers = sum(1 for s in steps if s.name == "nap")
    rep.runs_cut = sum(1 for ln in lines if ln.tag == "E" and ln.value == "raise-db")
    worst: dict[int, Overdue] = {}
    for o in samples:
        rep.longest_held = max(rep.longest_held, o.held)
        if o.held > o.bound and (o.job not in worst or o.held > worst[o.job].held):
            worst[o.job] = o
    rep.stuck = len(worst)
    for o in sorted(worst.values(), key=lambda o: o.job)[:20]:
        rep.violate(
            f"job {o.job} ({o.kind}): waiting while {o.why} for {o.held:.1f} s "
            f"(bound {o.bound:.1f} s): a workflow stuck"
        )
    return rep


def _check_steps(
    rep: Report,
    lines: Sequence[Line],
    steps: Sequence[StepRow],
    effects: Sequence[Effect],
    transactional: frozenset[str],
) -> None:
    starts: dict[tuple[int, str], list[Line]] = defaultdict(list)
    committed: dict[tuple[int, str], float] = {}
    for ln in lines:
        key = (ln.job, ln.what)
        if ln.tag == "X":
            starts[key].append(ln)
        elif ln.tag == "R":
            committed[key] = min(committed.get(key, ln.at), ln.at)
    recorded = {(s.job, s.name): s for s in steps}
    rep.step_fn_runs = sum(len(v) for v in starts.values())
    writes = Counter((e.job, e.step) for e in effects)
    rep.tx_writes = sum(writes.values())
    for key, runs in sorted(starts.items()):
        row = recorded.get(key)
        where = f"job {key[0]} step {key[1]!r}"
        if row is None:
            if writes.get(key):
                rep.tx_writes_wrong += 1
                rep.violate(f"{where}: not recorded, yet its transactional write committed")
            continue
        rep.steps_recorded += 1
        # Committed no later than the first ctx.step that returned it; at the latest
        # when recorded (now() of its statement, before the commit) if no run did.
        bound = committed.get(key, row.recorded_at)
        late = [r for r in runs if r.at > bound]
        rep.step_fn_runs_before_commit += max(0, len(runs) - len(late) - 1)
        if late:
            rep.steps_run_again += 1
            first = late[0]
            rep.violate(
                f"{where}: its function started again at {first.at:.3f} (pid {first.pid}, "
                f"attempt {first.value}), {first.at - bound:.3f} s after its record had "
                f"committed ({len(late)} time(s))"
            )
        if key[1] in transactional and writes.get(key, 0) != 1:
            rep.tx_writes_wrong += 1
            rep.violate(f"{where}: recorded, with {writes.get(key, 0)} transactional writes, not 1")
    for key, n in sorted(writes.items()):
        if key not in starts:
            rep.tx_writes_wrong += 1
            rep.violate(f"job {key[0]} step {key[1]!r}: {n} write(s), no run of its function")


def _check_children(
    rep: Report, lines: Sequence[Line], steps: Sequence[StepRow], children: Sequence[Child]
) -> None:
    spawned = {(s.job, s.name): s.value for s in steps if s.name.startswith("kid-")}
    by_step: dict[tuple[int, str | None], list[Child]] = defaultdict(list)
    for c in children:
        by_step[(c.parent, c.name)].append(c)
    for (parent, name), rows in sorted(by_step.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if len(rows) > 1:
            rep.children_twice += 1
            rep.violate(
                f"job {parent}: {len(rows)} children for step {name!r}: {[c.id for c in rows]}"
            )
        for c in rows:
            if spawned.get((parent, name or "")) != str(c.id):
                rep.children_unrecorded += 1
                rep.violate(
                    f"job {parent}: child {c.id} ({name!r}) is not the child its step recorded "
                    f"({spawned.get((parent, name or ''))})"
                )
    gathered = [ln for ln in lines if ln.tag == "C"]
    rep.gathers = len({ln.job for ln in gathered})
    counted: dict[int, int] = {}
    for ln in gathered:
        counted[ln.job] = int(ln.what)
    rep.children_gathered = sum(counted.values())


def _check_signals(
    rep: Report,
    kinds: dict[int, str],
    statuses: dict[int, str],
    lines: Sequence[Line],
    signals: dict[int, str],
    sent: dict[int, bool | None],
    seqs: dict[int, int],
) -> None:
    seen: dict[int, set[str]] = defaultdict(set)
    for ln in lines:
        if ln.tag == "G":
            seen[ln.job].add(ln.value)
    rep.signals_sent = sum(1 for v in sent.values() if v is True)
    rep.signals_refused = sum(1 for v in sent.values() if v is False)
    rep.signals_recorded = len(signals)
    rep.signals_delivered = sum(1 for job in signals if seen.get(job))
    for job, answer in sorted(sent.items()):
        if answer is True and job not in signals:
            rep.signals_lost += 1
            rep.violate(f"job {job}: venturi.signal said recorded; the signals table has none")
    for job, payload in sorted(signals.items()):
        want = str(seqs.get(job))
        if payload != want:
            rep.violate(f"job {job}: signal payload {payload} recorded, the harness sent {want}")
        if want not in seen.get(job, set()) or statuses.get(job) != "completed":
            rep.signals_lost += 1
            rep.violate(
                f"job {job} ({kinds.get(job)}, {statuses.get(job)}): its signal was recorded, "
                f"and it saw {sorted(seen.get(job, set()))}"
            )
    for job in sorted(set(seen) - set(signals)):
        rep.violate(f"job {job}: saw a signal {sorted(seen[job])} the table does not hold")
