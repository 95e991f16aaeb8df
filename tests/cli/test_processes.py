"""`venturi worker --processes P`: P supervised worker processes, one that dies restarted,
all stopped together; and the CLI worker running the maintenance its tasks need."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import typer.main

import venturi
from tests.support import ROOT, wait_for, workertasks
from venturi import admin, cli, db
from venturi.cli import processes


def spawn(dsn: str, runs: Path, module: str, *args: str) -> subprocess.Popen[bytes]:
    """`venturi worker MODULE ARGS`, its output (and its children's) in runs/out.txt."""
    env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(runs)}
    with open(runs / "out.txt", "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "venturi", "worker", module, *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def output(runs: Path) -> str:
    return (runs / "out.txt").read_text()


async def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    return await asyncio.to_thread(proc.wait, 60)


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


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _holds(predicate: Any) -> bool:
    return bool(predicate())


async def _completed(conn: Any, ids: list[int]) -> int:
    counts = await db.reads.job_counts(conn, schema="venturi", ids=ids)
    return sum(r["jobs"] for r in counts if r["status"] == "completed")


async def _all_completed(conn: Any, ids: list[int]) -> bool:
    return await _completed(conn, ids) == len(ids)


async def test_supervised_processes_restart_one_that_dies_and_stop_together(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    def started() -> int:
        return output(tmp_path).count(" started: kinds=")

    proc = spawn(
        dsn, tmp_path, "tests.support.workertasks", "--processes", "2", "--poll-max", "0.2"
    )
    try:
        await wait_for(lambda: _holds(lambda: started() == 2), within=30)
        first = children(proc.pid)
        assert len(first) == 2
        ids = await venturi.enqueue_many(
            conn, [workertasks.count.job(workertasks.Item(i)) for i in range(20)]
        )
        await wait_for(lambda: _all_completed(conn, ids), within=30)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        # Restarted: a third process starts in the victim's place.
        await wait_for(lambda: _holds(lambda: started() == 3), within=30)
        second = children(proc.pid)
        assert victim not in second and len(second) == 2 and len(second - first) == 1
        more = await venturi.enqueue_many(
            conn, [workertasks.count.job(workertasks.Item(i)) for i in range(20)]
        )
        await wait_for(lambda: _all_completed(conn, more), within=30)
    finally:
        code = await stop(proc)
    out = output(tmp_path)
    assert code == 0, out
    assert f"worker process {victim} exited with status -9" in out
    assert "restarting it in 1s" in out
    assert not any(alive(pid) for pid in first | second)
    # The two live children drained and stopped, each logging it.
    assert out.count(" stopped after ") == 2 and "all worker processes stopped" in out


async def test_supervised_processes_run_on_the_loop_given(dsn: str, tmp_path: Path) -> None:
    proc = spawn(
        dsn,
        tmp_path,
        "tests.support.workertasks",
        "--processes",
        "2",
        "--loop",
        "asyncio",
        "--poll-max",
        "0.2",
    )
    try:
        await wait_for(
            lambda: _holds(lambda: output(tmp_path).count(" started: kinds=") == 2), within=30
        )
    finally:
        code = await stop(proc)
    started = [line for line in output(tmp_path).splitlines() if " started: kinds=" in line]
    assert code == 0 and all(" loop=asyncio " in line for line in started), started


async def test_children_stop_when_their_supervisor_is_killed(dsn: str, tmp_path: Path) -> None:
    proc = spawn(
        dsn, tmp_path, "tests.support.workertasks", "--processes", "2", "--poll-max", "0.2"
    )
    try:
        await wait_for(lambda: _holds(lambda: len(children(proc.pid)) == 2), within=30)
        workers = children(proc.pid)
        await wait_for(
            lambda: _holds(lambda: output(tmp_path).count(" started: kinds=") == 2), within=30
        )
    finally:
        await stop(proc, signal.SIGKILL)  # the supervisor cannot pass anything on
    # Each child sees its pipe from the supervisor close and drains as on SIGTERM.
    await wait_for(lambda: _holds(lambda: not any(alive(p) for p in workers)), within=60)
    assert output(tmp_path).count(" stopped after ") == 2


def test_processes_that_cannot_start_stop_the_supervisor() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "venturi",
            "worker",
            "tests.support.workertasks",
            "--processes",
            "2",
            "--dsn",
            "postgresql://nobody@127.0.0.1:1/none",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "could not start" in out.stderr


# 99999999999 passed, and the supervisor set out to start them all.
@pytest.mark.parametrize("processes", ["0", "-2", "1025", "99999999999"])
def test_processes_must_be_from_one_to_the_most(processes: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "venturi",
            "worker",
            "tests.support.workertasks",
            f"--processes={processes}",
        ],
        cwd=ROOT,
        env={**os.environ, "VENTURI_DSN": "postgresql://x@127.0.0.1:1/x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"venturi: processes must be from 1 to 1024 (one per core is the rule), got {processes}"
    )


def test_children_get_every_option_but_processes_and_the_dsn() -> None:
    command = typer.main.get_command(cli.app)
    worker = command.commands["worker"]  # type: ignore[attr-defined]
    ctx = worker.make_context(
        "worker",
        [
            "tests.support.workertasks",
            "--dsn",
            "postgresql://u:secret@h/db",
            "--processes",
            "3",
            "--poll-max",
            "0.5",
            "--failures-to-dead",
            "--concurrency",
            "4",
        ],
    )
    args = processes.child_arguments(ctx)
    assert args[0] == "tests.support.workertasks"
    assert "--processes" not in args and "--dsn" not in args
    assert not any("secret" in a for a in args)
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert pairs["--poll-max"] == "0.5" and pairs["--concurrency"] == "4"
    assert "--failures-to-dead" in args and "--no-failures-to-dead" not in args
    assert args[args.index("--schema") + 1] == "venturi"
    # Each child listens for metrics on its own port.
    spread = processes._Supervisor(
        3, ["m", "--metrics-port", "9100", "--poll-max", "1"], "", None, 1
    )
    assert [spread._args(i) for i in range(3)] == [
        ["m", "--metrics-port", str(9100 + i), "--poll-max", "1"] for i in range(3)
    ]


async def test_cli_worker_runs_its_cron_schedule(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    proc = spawn(dsn, tmp_path, "tests.support.upkeeptasks", "--poll-max", "0.2")

    def beats() -> list[str]:
        return [line for f in tmp_path.glob("beats-*.txt") for line in f.read_text().splitlines()]

    try:
        await wait_for(lambda: _holds(lambda: len(beats()) >= 2), within=30)
    finally:
        code = await stop(proc)
    assert code == 0, output(tmp_path)
    jobs = await admin.list_jobs(conn, kind="upkeep_heartbeat", limit=100)
    assert all(j.key and j.key.startswith("cron:upkeep_heartbeat:") for j in jobs)
    assert len({j.visible_at for j in jobs}) == len(jobs) >= 2


@pytest.mark.parametrize("stuck", ["a sync handler", "an async handler's sync step"])
async def test_a_worker_exits_when_its_shutdown_releases_a_job_stuck_in_a_thread(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, stuck: str
) -> None:
    # A thread cannot be stopped: at shutdown_timeout the stuck handler's job is released
    # and its thread runs on. The worker said it had stopped, and its process never exited
    # (ThreadPoolExecutor's threads are joined at interpreter exit), not even on a second
    # signal. Handlers and steps run on daemon threads now (venturi.threads).
    task = workertasks.stuck if stuck == "a sync handler" else workertasks.stuck_step
    job = await task.enqueue(conn, workertasks.Item(1))
    proc = spawn(dsn, tmp_path, "tests.support.workertasks", "--shutdown-timeout", "0.5")
    try:
        await wait_for(lambda: _holds(lambda: (tmp_path / f"runs-{proc.pid}.txt").exists()), 30)
        code = await stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, output(tmp_path)
    assert "(1 released)" in output(tmp_path)
    info = await venturi.get_job(conn, job)
    assert info is not None and info.status == "pending"
