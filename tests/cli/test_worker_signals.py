"""How `venturi worker` (one process, or several under a supervisor) hears its signals:
real processes, signalled for real, each step awaited (an event its handler wrote, a line
it logged), never a fixed sleep."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.support import ROOT, status_of, wait_status, wait_until
from tests.support.signaltasks import Item, blocking, polite, stubborn

MODULE = "tests.support.signaltasks"


def spawn(dsn: str, runs: Path, *args: str) -> subprocess.Popen[bytes]:
    """`venturi worker MODULE ARGS`, its output (and its children's) in runs/out.txt."""
    env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(runs)}
    with open(runs / "out.txt", "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "venturi", "worker", MODULE, "--poll-max", "0.2", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # SIGHUP as a terminal would send it, even to tests run under nohup.
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
        )


def output(runs: Path) -> str:
    return (runs / "out.txt").read_text()


def events(runs: Path, event: str) -> list[str]:
    """The lines "EVENT JOB PID" the handlers wrote, of that event."""
    path = runs / "events.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if line.split()[0] == event]


def children(pid: int) -> set[int]:
    """Live (not zombie) processes whose parent is ``pid``, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.add(int(entry.name))
    return found


async def exited(proc: subprocess.Popen[bytes], within: float = 20) -> int:
    """The process's exit status; it is killed (and the test fails) if it runs on."""
    try:
        return await asyncio.to_thread(proc.wait, within)
    except subprocess.TimeoutExpired:
        proc.kill()
        await asyncio.to_thread(proc.wait)
        raise AssertionError(f"still running {within}s later") from None


async def test_a_handler_that_ignores_its_cancellation_does_not_hold_the_exit(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    # The worker abandons the handler after its clean-up time and logs "stopped";
    # asyncio.Runner's close then cancelled it again and waited for it without a limit,
    # while its released job could already run on another worker.
    job = await stubborn.enqueue(conn, Item(1))
    proc = spawn(dsn, tmp_path, "--shutdown-timeout", "0.3")
    try:
        await wait_until(lambda: bool(events(tmp_path, "start")), within=30)
        proc.send_signal(signal.SIGTERM)
        code = await exited(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 0, out
    assert " stopped after " in out and "(1 released)" in out, out
    assert "1 task(s) ignored their cancellation" in out, out
    assert "Traceback" not in out and "destroyed" not in out, out
    assert await status_of(conn, job) == "pending"


async def test_children_signalled_with_their_supervisor_drain_once(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    # systemd's KillMode=control-group (the default) sends SIGTERM to every process of
    # the unit at once. The supervisor passed its own on as a second SIGTERM, so each
    # child counted two signals and stopped at once, releasing jobs with most of their
    # 30 s grace left.
    jobs = [await polite.enqueue(conn, Item(i)) for i in range(2)]
    proc = spawn(dsn, tmp_path, "--processes", "2", "--concurrency", "1")
    try:
        await wait_until(lambda: len(events(tmp_path, "start")) == 2, within=30)
        workers = children(proc.pid)
        assert len(workers) == 2
        # Each child takes its own signal first (two signals that arrive together are
        # one), then the supervisor its own.
        for pid in workers:
            os.kill(pid, signal.SIGTERM)
        await wait_until(lambda: len(events(tmp_path, "asked")) == 2, within=30)
        os.kill(proc.pid, signal.SIGTERM)
        await wait_until(
            lambda: (
                "processes to drain" in output(tmp_path) or "stopped at once" in output(tmp_path)
            )
        )
        (tmp_path / "finish").touch()
        code = await exited(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 0, out
    assert "second signal: released" not in out, out
    assert out.count("venturi: stopping: ") == 2, out
    for job in jobs:
        assert await status_of(conn, job) == "completed", out


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_sighup_drains_as_sigterm_does(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, processes: str
) -> None:
    # A closed terminal or ssh session sends SIGHUP: it killed a single worker outright
    # (its jobs claimed until their leases expired), and a supervisor (its children,
    # their pipe closed, drained).
    jobs = [await polite.enqueue(conn, Item(i)) for i in range(int(processes))]
    proc = spawn(dsn, tmp_path, "--processes", processes, "--concurrency", "1")
    try:
        await wait_until(lambda: len(events(tmp_path, "start")) == len(jobs), within=30)
        proc.send_signal(signal.SIGHUP)
        await wait_until(lambda: len(events(tmp_path, "asked")) == len(jobs) or bool(proc.poll()))
        (tmp_path / "finish").touch()
        code = await exited(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 0, out
    assert out.count("venturi: stopping: ") == len(jobs), out
    for job in jobs:
        assert await status_of(conn, job) == "completed", out


def test_a_sighup_ignored_by_nohup_stays_ignored() -> None:
    check = (
        "import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "from venturi.cli.signals import stop_signals; print(sorted(stop_signals()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == str(sorted([signal.SIGINT, signal.SIGTERM])), out


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_a_third_signal_exits_while_a_handler_blocks_the_loop(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, loop: str
) -> None:
    # An async handler that blocks the event loop (time.sleep, a sync HTTP call) left the
    # worker deaf to every signal until it returned; the three were then acted on
    # together. Three different signals: two of one kind sent together are one.
    job = await blocking.enqueue(conn, Item(1))
    proc = spawn(dsn, tmp_path, "--loop", loop)
    try:
        await wait_until(lambda: bool(events(tmp_path, "start")), within=30)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            proc.send_signal(sig)
        code = await exited(proc)
    finally:
        (tmp_path / "unblock").touch()
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 130, out
    assert not events(tmp_path, "end"), out  # exited while the handler still blocked
    assert "venturi: stopped at once" in out, out
    assert await status_of(conn, job) == "claimed"  # its lease will bring it back


async def test_a_supervisor_whose_children_stopped_at_once_exits_130(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    # Each child exited 130 (as a single worker does after a second signal), and the
    # supervisor 0, as after a clean drain.
    jobs = [await polite.enqueue(conn, Item(i)) for i in range(2)]
    proc = spawn(dsn, tmp_path, "--processes", "2", "--concurrency", "1")
    try:
        await wait_until(lambda: len(events(tmp_path, "start")) == 2, within=30)
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: len(events(tmp_path, "asked")) == 2, within=30)
        proc.send_signal(signal.SIGINT)
        code = await exited(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 130, out
    assert out.count("stopped at once on a second signal: released 1 running job") == 2, out
    for job in jobs:
        assert await status_of(conn, job) == "pending", out


async def test_a_third_signal_says_the_jobs_were_being_released(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    # It said "running jobs are recovered when their leases expire" when they had just
    # been released (pending, journal `released`) and the worker waited for a handler
    # that ignores its cancellation to clean up.
    job = await stubborn.enqueue(conn, Item(1))
    proc = spawn(dsn, tmp_path)
    try:
        await wait_until(lambda: bool(events(tmp_path, "start")), within=30)
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: "venturi: stopping: " in output(tmp_path), within=30)
        proc.send_signal(signal.SIGINT)
        await wait_status(conn, job, "pending", within=30)
        proc.send_signal(signal.SIGHUP)
        code = await exited(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = output(tmp_path)
    assert code == 130, out
    assert "stopped at once on a third signal while the running jobs were released" in out, out
    assert "running jobs are recovered when their leases expire" not in out, out


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--concurrency", "0"], "concurrency must be an integer >= 1, got 0"),
        (["--poll-max", "-1"], "poll_max must be positive, got -1.0"),
        (
            ["--metrics-port", "65535"],
            "metrics-port 65535 with 3 processes: process i listens on 65535 + i, "
            "and 65537 is past 65535",
        ),
    ],
)
async def test_a_supervisor_checks_the_options_before_it_starts_a_child(
    dsn: str, conn: asyncpg.Connection, bad: list[str], said: str
) -> None:
    # Checked only in each child: --concurrency 0 printed its error three times, and
    # with --metrics-port 65535 child 0 claimed a job while child 1 failed.
    job = await polite.enqueue(conn, Item(1))
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "venturi", "worker", MODULE, "--processes", "3", *bad],
        cwd=ROOT,
        env={**os.environ, "VENTURI_DSN": dsn},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out
    assert out.stderr == f"venturi: {said}\n" and not out.stdout, out
    assert await status_of(conn, job) == "pending"
