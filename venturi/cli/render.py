"""How the operator reads look in a terminal: rich renderables for ``venturi jobs``,
``venturi stats``, ``venturi workers``, ``venturi kinds list`` and ``venturi top``.

Pure functions of what ``venturi.admin`` read; nothing here touches a database, so a
frame renders the same in a test as in a terminal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from venturi import formatting
from venturi.admin import JobDetail, JobRow, KindState, Stats, TopFrame, WorkerInfo
from venturi.errors import exception_line
from venturi.formatting import ago, clip, duration, shell_word, shown_name, terminal_safe, to_json
from venturi.priority import Priority
from venturi.status import FINISHED, JobStatus, JournalEvent

# Journal events that end an execution badly; their detail may hold a traceback.
_FAILURE_EVENTS = {
    JournalEvent.FAILED,
    JournalEvent.RETRIED,
    JournalEvent.TIMED_OUT,
    JournalEvent.STALE_RECOVERED,
    JournalEvent.DEAD,
}

_STATE_STYLE = {"live": "green", "gone": "bold red", "stopped": "dim", "unregistered": "yellow"}

_STATUS_STYLE: dict[str, str] = {
    JobStatus.PENDING: "cyan",
    JobStatus.CLAIMED: "yellow",
    JobStatus.COMPLETED: "green",
    JobStatus.DEAD: "bold red",
    JobStatus.CANCELLED: "magenta",
    JobStatus.WAITING: "blue",
}


def _priority(value: int) -> str:
    try:
        return Priority(value).name.lower()
    except ValueError:
        return str(value)


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLE.get(status, ""))


def _first_line(text: str | None, width: int = 60) -> str:
    # Of a traceback, the exception it ends with, its whole message on one line: the line
    # an operator wants.
    line = exception_line(text)
    return line if len(line) <= width else line[: width - 1] + "…"


def jobs_table(rows: list[JobRow], now: datetime) -> Table:
    """``venturi jobs list``."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    # A long kind (up to 200 characters) folds as a group's name does, the last column
    # wraps, the rest keep their width: a cut kind squeezed every row's id and status to "…".
    whole = {"id": [str(r.id) for r in rows], "status": [r.status for r in rows]}
    whole["prio"] = [_priority(r.priority) for r in rows]
    for name in ("id", "kind", "status", "prio", "att", "fail", "created", "when", "worker"):
        table.add_column(
            "worker / last error" if name == "worker" else name,
            justify="right" if name in ("id", "att", "fail") else "left",
            no_wrap=name not in ("kind", "worker"),
            overflow="fold" if name == "kind" else "ellipsis",
            min_width=max(map(len, whole[name]), default=None) if name in whole else None,
        )
    for r in rows:
        if r.status == JobStatus.PENDING:
            when = "due" if r.visible_at <= now else ago(r.visible_at, now)
            note = _first_line(r.last_error)
        elif r.status == JobStatus.CLAIMED:
            when = f"since {ago(r.claimed_at, now)}"
            note = r.claimed_by or ""
            if r.cancel_requested_at is not None:
                note += " (cancel requested)"
        else:
            when = ago(r.finished_at, now)
            note = _first_line(r.last_error)
        table.add_row(
            str(r.id),
            _name(r.kind),
            _status(r.status),
            _priority(r.priority),
            str(r.attempt),
            f"{r.failures}/{r.max_failures}",
            ago(r.created_at, now),
            when,
            _text(note),
        )
    return table


def _name(value: str) -> Text:
    """A name the application chose (a kind, a key, a worker's), quoted and escaped when
    it would not read as itself (``shown_name``): a key holding ESC[2J cleared the
    operator's terminal, kinds ``acme`` and ``acme\u200b`` read alike."""
    return Text(shown_name(value))


def _text(value: str, style: str = "") -> Text:
    """Free text from the database (an error, a reason, a journal's detail): its lines
    kept, no character that acts on the terminal (``terminal_safe``)."""
    return Text(terminal_safe(value), style=style)


def _group_rows(fields: Table, detail: JobDetail) -> None:
    """The job's group and, while it is pending, why it waits (SPEC 13)."""
    if detail.job.group is not None:
        # Quoted when it would not read as itself ("acme ", "acme\u200b").
        fields.add_row("group", Text(shown_name(detail.job.group)))
    waits = "; ".join(w for w in (detail.group_waits, detail.kind_waits) if w is not None)
    if waits:
        fields.add_row("waits", Text(waits, style="yellow"))


def job_detail(detail: JobDetail, now: datetime) -> Group:
    """``venturi jobs show``: the row, the carry and result, the journal, the tracebacks."""
    job = detail.job
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    # Folded, not cut: a group's name (up to 200 characters) is copied into groups set.
    fields.add_column(overflow="fold")

    def at(value: datetime | None) -> str:
        return (
            "—" if value is None else f"{value.isoformat(timespec='seconds')} ({ago(value, now)})"
        )

    fields.add_row("id", str(job.id))
    fields.add_row("kind", _name(job.kind))
    fields.add_row("status", _status(job.status))
    fields.add_row("priority", _priority(job.priority))
    fields.add_row("key", _name(clip(job.key, 200)) if job.key is not None else "—")
    _group_rows(fields, detail)
    fields.add_row("attempt", str(job.attempt))
    fields.add_row("failures", f"{job.failures} of {job.max_failures}")
    fields.add_row("created", at(job.created_at))
    fields.add_row("visible", at(job.visible_at))
    if job.claimed_by is not None:
        fields.add_row("claimed by", _name(job.claimed_by))
        fields.add_row("claimed", at(job.claimed_at))
    if job.status == JobStatus.CLAIMED:
        fields.add_row("lease until", at(job.claim_expires_at))
    if job.cancel_requested_at is not None:
        fields.add_row("cancel asked", at(job.cancel_requested_at))
    fields.add_row("finished", at(job.finished_at))
    _workflow_fields(fields, detail, now)
    parts: list[RenderableType] = [fields]
    parts.append(_json_panel("carry", job.carry))
    if job.result is not None:
        parts.append(_json_panel("result", job.result))
    parts += workflow_tables(detail)

    journal = Table(title="journal", title_justify="left", box=None, header_style="bold")
    # Only the detail gives way on a narrow terminal.
    for name in ("at", "event", "attempt", "worker"):
        journal.add_column(name, no_wrap=True)
    journal.add_column("detail", overflow="fold")
    for e in detail.journal:
        journal.add_row(
            e.at.isoformat(timespec="milliseconds"),
            Text(e.event, style="red" if e.event in _FAILURE_EVENTS else ""),
            str(e.attempt),
            _name(e.worker) if e.worker else "",
            _text(_first_line(e.detail)),
        )
    parts.append(journal)

    # Full tracebacks: the journal keeps one per failed execution; show each execution's
    # own (two attempts failing the same way are still two failures), and last_error when
    # the journal does not already hold it.
    shown: set[str] = set()
    for e in detail.journal:
        if e.detail and "\n" in e.detail.strip():
            shown.add(e.detail)
            parts.append(
                Panel(
                    _text(clip(e.detail.rstrip())),
                    title=f"{e.event} · attempt {e.attempt} · {e.at.isoformat(timespec='seconds')}",
                    title_align="left",
                    border_style="red",
                    expand=False,
                )
            )
    if job.last_error and job.last_error not in shown:
        parts.append(
            Panel(
                _text(clip(job.last_error.rstrip())),
                title="last error",
                title_align="left",
                expand=False,
            )
        )
    return Group(*parts)


def _workflow_fields(fields: Table, detail: JobDetail, now: datetime) -> None:
    """The rows of ``jobs show`` for a workflow: its parent, its wait, its kind paused."""
    job = detail.job
    if detail.parent_id is not None:
        fields.add_row("parent", str(detail.parent_id))
    if detail.waiting_for is not None:
        fields.add_row("waiting for", _text(waiting_for(detail, now)))
    if detail.kind_paused and job.status not in FINISHED:
        fields.add_row(
            "kind paused",
            _text(f"{shown_name(job.kind)} is paused: venturi kinds resume {shell_word(job.kind)}"),
        )


def waiting_for(detail: JobDetail, now: datetime) -> str:
    """What a waiting job waits for now, in one line: ``timer at T (in 5m)``, ``signal
    'approve'``, ``2 of 3 children``, ``1 dependency``."""
    w = detail.waiting_for
    if w is None:
        return ""
    what = []
    if w.signal is not None:
        what.append(f"signal {w.signal!r}")
    if w.children:
        what.append(f"{w.children} of {len(detail.children)} children")
    if w.dependencies:
        what.append(f"{w.dependencies} {'dependency' if w.dependencies == 1 else 'dependencies'}")
    line = ", ".join(what)
    if w.wake_at is not None:
        timer = f"timer at {w.wake_at.isoformat(timespec='seconds')} ({ago(w.wake_at, now)})"
        # With a signal, the timer is its timeout: whichever comes first wakes the job.
        line = f"{line} or {timer}" if line else timer
    if w.paused_kinds:
        line += f"; paused: {', '.join(w.paused_kinds)} (they wait until resumed)"
    return line


def workflow_tables(detail: JobDetail) -> list[RenderableType]:
    """A workflow job's steps, signals, children and dependencies (none for a plain job)."""
    out: list[RenderableType] = []
    for title, heads, rows in (
        ("steps", ("name", "recorded at"), [(s.name, _stamp(s.recorded_at)) for s in detail.steps]),
        ("signals", ("name", "sent at"), [(s.name, _stamp(s.sent_at)) for s in detail.signals]),
        (
            "children",
            ("id", "kind", "status"),
            [(str(c.id), c.kind, c.status) for c in detail.children],
        ),
        (
            "dependencies",
            ("node", "id", "kind", "status"),
            [
                (d.name, str(d.id), d.kind or "—", d.status or "deleted")
                for d in detail.dependencies
            ],
        ),
    ):
        if not rows:
            continue
        table = Table(title=title, title_justify="left", box=None, header_style="bold")
        for name in heads:
            table.add_column(name)
        for row in rows:
            cells = [_text(c) for c in row]
            if heads[-1] == "status":
                table.add_row(*cells[:-1], _status(row[-1]))
            else:
                table.add_row(*cells)
        out.append(table)
    return out


def _stamp(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds")


def _json_panel(title: str, value: Any) -> Panel:
    return Panel(Text(clip(to_json(value))), title=title, title_align="left", expand=False)


def stats_table(stats: Stats) -> Table:
    """``venturi stats``: one row per kind and a total."""
    recent = f"done/{formatting.window_label(stats.completed_window_seconds)}"
    failed = f"failed/{formatting.window_label(stats.failures_window_seconds)}"
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("kind")
    counted = (
        JobStatus.WAITING,
        JobStatus.CLAIMED,
        JobStatus.COMPLETED,
        JobStatus.DEAD,
        JobStatus.CANCELLED,
    )
    for name in ("due", "scheduled", *counted):
        table.add_column(name, justify="right")
    table.add_column("oldest due", justify="right")
    table.add_column(recent, justify="right")
    table.add_column(failed, justify="right")
    table.add_column("note")
    totals = [0] * 9
    oldest: float | None = None
    for k in stats.kinds:
        # `stats` counts every finished job and the recent ones: none of these is None.
        completed, cancelled = k.completed or 0, k.cancelled or 0
        completed_recent, failures_recent = k.completed_recent or 0, k.failures_recent or 0
        nums = [k.due, k.scheduled, k.waiting, k.claimed, completed, k.dead, cancelled]
        claimed = str(k.claimed) + (f" ({k.expired} expired)" if k.expired else "")
        table.add_row(
            _name(k.kind),
            str(k.due),
            str(k.scheduled),
            str(k.waiting),
            claimed,
            str(completed),
            Text(str(k.dead), style="red" if k.dead else ""),
            str(cancelled),
            duration(k.oldest_due_seconds),
            str(completed_recent),
            Text(str(failures_recent), style="red" if failures_recent else ""),
            kind_note(k.paused, k.no_live_worker),
        )
        for i, n in enumerate([*nums, completed_recent, failures_recent]):
            totals[i] += n
        if k.oldest_due_seconds is not None:
            oldest = max(oldest or 0.0, k.oldest_due_seconds)
    if len(stats.kinds) > 1:
        table.add_section()
        table.add_row(
            Text("total", style="bold"),
            *(str(n) for n in totals[:7]),
            duration(oldest),
            str(totals[7]),
            str(totals[8]),
            "",
        )
    return table


def kind_note(paused: bool, no_live_worker: bool) -> Text:
    """What an operator must know of a kind: ``paused``, ``no live worker`` (its due jobs
    wait for a worker that registers it)."""
    notes = []
    if paused:
        notes.append(("paused", "magenta"))
    if no_live_worker:
        notes.append(("no live worker", "bold red"))
    return Text(", ").join(Text(n, style=s) for n, s in notes)


def stats(stats: Stats) -> Group:
    """``venturi stats``: the kinds, then the workers live or gone."""
    return Group(stats_table(stats), "", fleet_table(stats.workers, stats.liveness_seconds))


def fleet_table(workers: list[WorkerInfo], liveness: float) -> Table:
    """The workers of ``venturi stats`` and ``top``: live (idle ones too) and gone."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (
        ("worker", "left"),
        ("state", "left"),
        ("kinds", "left"),
        ("claims", "right"),
        ("slots", "right"),
        ("heartbeat", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for w in workers:
        table.add_row(
            _name(w.name),
            _state(w.state),
            _text(",".join(shown_name(k) for k in w.kinds)),
            _claims(w),
            "—" if w.concurrency is None else str(w.concurrency),
            _heartbeat(w),
        )
    if not workers:
        table.add_row(Text(f"no worker live or gone (liveness {liveness:g}s)", style="dim"))
    return table


def workers_table(workers: list[WorkerInfo]) -> Table:
    """``venturi workers``: every registered worker run and the claims each holds."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (
        ("id", "left"),
        ("worker", "left"),
        ("state", "left"),
        ("kinds", "left"),
        ("claims", "right"),
        ("slots", "right"),
        ("heartbeat", "right"),
        ("up", "right"),
        ("version", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for w in workers:
        up = None
        if w.started_at is not None and w.heartbeat_at is not None:
            up = (w.heartbeat_at - w.started_at).total_seconds()
        table.add_row(
            "—" if w.id is None else str(w.id)[:8],
            _name(w.name),
            _state(w.state),
            _text(",".join(shown_name(k) for k in w.kinds)),
            _claims(w),
            "—" if w.concurrency is None else str(w.concurrency),
            _heartbeat(w),
            duration(up),
            _text(w.version or "—"),
        )
    if not workers:
        table.add_row(Text("no worker has registered", style="dim"))
    return table


def kinds_table(kinds: list[KindState]) -> Table:
    """``venturi kinds list``: every kind the database knows, paused or not."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    # All but the state fold onto more lines on a narrow terminal: with only the reason
    # giving way, 40 columns dropped the state and reason and cut the kinds' names.
    for name in ("kind", "state", "paused at", "by", "reason"):
        state = name == "state"
        table.add_column(name, no_wrap=state, overflow="fold", min_width=6 if state else None)
    for k in kinds:
        if k.paused_at is None:
            table.add_row(_name(k.kind), "active")
            continue
        table.add_row(
            _name(k.kind),
            Text("paused", style="bold yellow"),
            k.paused_at.isoformat(timespec="seconds"),
            _text(k.paused_by or "—"),
            _text(k.reason or ""),
        )
    return table


def _state(state: str) -> Text:
    return Text(state, style=_STATE_STYLE.get(state, ""))


def _claims(w: WorkerInfo) -> str:
    return str(w.claims) + (f" ({w.expired} expired)" if w.expired else "")


def _heartbeat(w: WorkerInfo) -> str:
    if w.heartbeat_age_seconds is None:
        return "—"
    return f"{duration(w.heartbeat_age_seconds)} ago"


def top(frame: TopFrame, title: str = "venturi top") -> Group:
    """One frame of ``venturi top``: per kind, then the workers holding claims."""
    window = frame.completed_window_seconds
    kinds = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    kinds.add_column("kind")
    failed = f"failed/{formatting.window_label(frame.failures_window_seconds)}"
    # "pending" here is the due jobs (`due` in `venturi stats`).
    heads = (
        JobStatus.PENDING,
        "scheduled",
        JobStatus.WAITING,
        JobStatus.CLAIMED,
        "done/s",
        failed,
        JobStatus.DEAD,
    )
    for name in (*heads, "oldest due"):
        kinds.add_column(name, justify="right")
    kinds.add_column("note")
    for k in frame.kinds:
        kinds.add_row(
            _name(k.kind),
            str(k.due),
            str(k.scheduled),
            str(k.waiting),
            str(k.claimed) + (f" ({k.expired} expired)" if k.expired else ""),
            f"{(k.completed_recent or 0) / window:.1f}",
            Text(str(k.failures_recent or 0), style="red" if k.failures_recent else ""),
            Text(str(k.dead), style="red" if k.dead else ""),
            duration(k.oldest_due_seconds),
            kind_note(k.paused, k.no_live_worker),
        )
    if not frame.kinds:
        kinds.add_row(Text("no jobs", style="dim"), *[""] * 9)
    workers = fleet_table(frame.workers, frame.liveness_seconds)
    stamp = frame.at.astimezone().strftime("%H:%M:%S")
    header = Text.assemble(
        (title, "bold"),
        f"  {stamp}  done/s over the last {formatting.window_label(window)}",
    )
    return Group(header, "", kinds, "", workers)
