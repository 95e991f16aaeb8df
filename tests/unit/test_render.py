"""How ``venturi.cli.render`` prints the application's names (kinds, keys, groups, worker
names, pause reasons): as they are, whatever rich markup or backslashes they hold. The
renderers are pure functions of the admin reads' structs, so they are drawn here on a
recording console, as the commands draw them."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import msgspec
from rich.console import Console, RenderableType

from venturi.admin import JobDetail, JobRow, KindState, Stats, TopFrame, WorkerInfo
from venturi.cli import render
from venturi.jobs import JobInfo, JournalEntry
from venturi.kind_health import KindHealth
from venturi.priority import Priority

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
# rich.markup.escape printed the first as "trailing\\" and the second as "a[b"; the last
# is markup a name must not be.
NAMES = ("trailing\\", "a\\[b", "[bold]x[/bold]")


def drawn(renderable: RenderableType) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None, highlight=False)
    console.print(renderable)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def job(name: str) -> JobInfo:
    return JobInfo(
        id=1,
        kind=name,
        status="claimed",
        priority=Priority.NORMAL,
        carry={},
        attempt=1,
        failures=0,
        visible_at=NOW,
        created_at=NOW,
        finished_at=None,
        result=None,
        last_error=None,
        key=name,
        max_failures=25,
        claimed_by=name,
        claimed_at=NOW,
        claim_expires_at=NOW + timedelta(minutes=5),
        group=name,
    )


def worker(name: str) -> WorkerInfo:
    return WorkerInfo(
        id=None,
        name=name,
        state="live",
        host=None,
        pid=None,
        kinds=[name],
        concurrency=4,
        version=name,
        started_at=NOW,
        heartbeat_at=NOW,
        stopped_at=None,
        heartbeat_age_seconds=1.0,
        claims=1,
        expired=0,
        oldest_claim_at=None,
    )


def health(name: str) -> KindHealth:
    return KindHealth(
        kind=name,
        due=1,
        scheduled=0,
        waiting=0,
        claimed=1,
        expired=0,
        completed=0,
        dead=0,
        cancelled=0,
        oldest_due_seconds=1.0,
        completed_recent=0,
        failures_recent=0,
        paused=False,
        no_live_worker=False,
    )


def test_every_name_prints_as_it_is() -> None:
    for name in NAMES:
        row = JobRow(
            1, name, "claimed", 2, name, 1, 0, 25, NOW, NOW, NOW, name, None, None, None, None
        )
        listed = drawn(render.jobs_table([row], NOW))
        assert f" {name} " in listed and listed.rstrip().endswith(name), (name, listed)

        entry = JournalEntry(NOW, "claimed", 1, name, None)
        shown = drawn(render.job_detail(JobDetail(job(name), [entry]), NOW))
        lines = {
            line.split(None, 1)[0]: line.split(None, 1)[1].strip()
            for line in shown.splitlines()[:12]
            if line.strip()
        }
        for field in ("kind", "key", "group"):
            assert lines[field] == name, (field, name, shown)
        assert f"  {name}" in shown.split("journal")[1], shown

        paused = KindState(name, True, NOW, name, name)
        assert drawn(render.kinds_table([paused])).count(name) == 3, name
        workers = drawn(render.workers_table([worker(name)]))
        assert workers.count(name) == 3, (name, workers)
        stats = drawn(render.stats(Stats(60, 60, [health(name)], 30, [worker(name)])))
        assert stats.count(name) == 3, (name, stats)
        frame = drawn(render.top(TopFrame(NOW, 60, 60, [health(name)], [worker(name)])))
        assert frame.count(name) == 3, (name, frame)


def test_no_name_or_text_reaches_the_terminal_raw() -> None:
    # A key is often request data: one holding ESC[2J cleared the operator's terminal in
    # `jobs show`, kinds `acme` and `acme\u200b` listed as two identical rows, and a
    # newline in a kind split a table's row. Names print as groups do (quoted, escaped);
    # free text (reasons, errors) keeps its lines but none of its control characters.
    for name in ("order-1\x1b]0;pwned\x07\x1b[2J", "two\nlines", "acme\u200b", "bell\x07"):
        row = JobRow(
            1, name, "dead", 2, name, 1, 1, 25, NOW, NOW, None, None, None, NOW, name, None
        )
        entry = JournalEntry(NOW, "failed", 1, name, f"Traceback\n  oops {name}")
        detail = JobDetail(msgspec.structs.replace(job(name), last_error=name), [entry])
        drawings = [
            drawn(render.jobs_table([row], NOW)),
            drawn(render.job_detail(detail, NOW)),
            drawn(render.kinds_table([KindState(name, True, NOW, name, name)])),
            drawn(render.workers_table([worker(name)])),
            drawn(render.stats(Stats(60, 60, [health(name)], 30, [worker(name)]))),
            drawn(render.top(TopFrame(NOW, 60, 60, [health(name)], [worker(name)]))),
        ]
        for i, out in enumerate(drawings):
            assert not any(c in out for c in "\x1b\x07\u200b"), (name, out)
            if i != 1:  # a table's row is one row (a job's last error keeps its lines)
                assert "\nlines" not in out, (name, out)
        assert repr(name) in drawings[1], drawings[1]


def test_the_resume_hint_of_a_paused_kind_is_a_command_that_works() -> None:
    # `venturi kinds resume kzw\u200b`, pasted into bash, named the kind "kzwu200b":
    # the kind is one shell word, $'...' when it holds what does not print.
    for kind, word in (("mail", "mail"), ("kzw\u200b", "$'kzw\\u200b'"), ("a b", "'a b'")):
        detail = JobDetail(msgspec.structs.replace(job(kind), status="pending"), [])
        detail = msgspec.structs.replace(detail, kind_paused=True)
        shown = drawn(render.job_detail(detail, NOW))
        assert f"venturi kinds resume {word}" in shown, (kind, shown)
