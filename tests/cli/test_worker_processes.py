"""Workers as separate processes: the CLI, a crash, scale-out, and database faults."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import (
    ROOT,
    events,
    running,
    wait_for,
    wait_status,
    wait_until,
    without_uvloop,
    workertasks,
)
from tests.support import sql as test_sql
from venturi import Backoff, db, testing
from venturi.runtime.worker import Worker


def spawn_worker(
    dsn: str, runs: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(runs), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "venturi", "worker", "tests.support.workertasks", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_runs(runs: Path) -> list[tuple[int, int, int]]:
    rows = []
    for f in runs.glob("runs-*.txt"):
        for line in f.read_text().splitlines():
            job, attempt, pid = map(int, line.split())
            rows.append((job, attempt, pid))
    return rows


async def _completed(conn: Any, ids: list[int]) -> int:
    counts = await db.reads.job_counts(conn, schema="venturi", ids=ids)
    return sum(r["jobs"] for r in counts if r["status"] == "completed")


async def test_cli_worker_runs_and_stops_on_sigterm(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    ids = await venturi.enqueue_many(
        conn, [workertasks.count.job(workertasks.Item(i)) for i in range(50)]
    )
    proc = spawn_worker(dsn, tmp_path, "--concurrency", "4", "--poll-max", "0.5")
    try:
        await wait_for(lambda: _eq(_completed(conn, ids), 50), within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    assert "worker" in out and "started" in out and "stopped" in out
    assert sorted(j for j, _, _ in read_runs(tmp_path)) == sorted(ids)


@pytest.mark.parametrize(
    ("args", "uvloop", "loop"),
    [
        ((), True, "uvloop"),  # the default, --loop auto, where uvloop is installed
        (("--loop", "uvloop"), True, "uvloop"),
        (("--loop", "asyncio"), True, "asyncio"),
        (("--loop", "auto"), False, "asyncio"),  # auto without uvloop: asyncio
    ],
)
async def test_cli_worker_drains_on_the_loop_it_names(
    dsn: str,
    conn: asyncpg.Connection,
    tmp_path: Path,
    args: tuple[str, ...],
    uvloop: bool,
    loop: str,
) -> None:
    ids = await venturi.enqueue_many(
        conn, [workertasks.count.job(workertasks.Item(i)) for i in range(30)]
    )
    env = None if uvloop else without_uvloop(tmp_path)
    proc = spawn_worker(dsn, tmp_path, "--concurrency", "4", "--poll-max", "0.5", *args, env=env)
    try:
        await wait_for(lambda: _eq(_completed(conn, ids), 30), within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    [line] = [x for x in out.splitlines() if " started: kinds=" in x]
    assert f" loop={loop} " in line, line
    assert sorted(j for j, _, _ in read_runs(tmp_path)) == sorted(ids)


async def _eq(value: Any, expected: Any) -> bool:
    return bool((await value) == expected)


def test_cli_worker_bad_module_is_one_line() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "venturi",
            "worker",
            "no_such_module_xyz",
            "--dsn",
            "postgresql://x@127.0.0.1:1/x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "cannot import" in out.stderr


async def test_a_stop_that_finds_the_listen_connection_cut_still_exits_0(
    dsn: str, conn: asyncpg.Connection
) -> None:
    # tests.support.listencut terminates the LISTEN connection's backend as the stop
    # begins: the UNLISTEN fails and the pool has already taken the connection back.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "worker",
        "tests.support.listencut",
        "--poll-max",
        "0.5",
        cwd=ROOT,
        env={**os.environ, "VENTURI_DSN": dsn},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        while not any(" started: " in line for line in lines):
            raw = await asyncio.wait_for(proc.stderr.readline(), 60)
            if not raw:
                break
            lines.append(raw.decode().rstrip("\n"))
        proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.stderr.read(), 60)
        code = await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    out = "\n".join(lines) + "\n" + rest.decode()
    assert "listencut: terminated the LISTEN backend" in out, out  # the cut happened
    assert code == 0 and "Traceback" not in out, out
    assert " stopped after " in out, out


# Serial (tests/support/alone.py): a worker killed while it holds a one-second lease, then
# a second one that must take the job over once the lease runs out.
@pytest.mark.serial
async def test_killed_worker_is_recovered_after_its_lease(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VENTURI_TEST_RUNS_DIR", str(tmp_path))
    job_id = await workertasks.block.enqueue(conn, workertasks.Item(1))
    victim = spawn_worker(dsn, tmp_path, "--lease", "1", "--poll-max", "0.2")
    try:
        await wait_status(conn, job_id, "claimed", within=30)
        await wait_until(lambda: bool(read_runs(tmp_path)), within=30)
    finally:
        victim.kill()  # SIGKILL: no chance to release
        await asyncio.to_thread(victim.communicate, timeout=30)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "claimed" and job.claimed_by is not None
    dead_identity = job.claimed_by
    assert dead_identity.endswith(f":{victim.pid}")
    # Another worker (in this process) recovers it once the 1 s lease has expired.
    rescuer = Worker(None, dsn, [workertasks.block], poll_max=0.2, backoff=Backoff.fixed(0))
    async with running(rescuer):
        await wait_status(conn, job_id, "completed", within=30)
    journal = await venturi.get_journal(conn, job_id)
    assert events(journal) == [
        "enqueued",
        "claimed",
        "stale-recovered",
        "claimed",
        "completed",
    ]
    assert journal[1].worker == dead_identity
    assert f"{dead_identity} presumed dead" in (journal[2].detail or "")
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.failures == 1 and job.attempt == 2


# Serial: four worker processes of eight slots each, draining 20,000 jobs as fast as the
# machine lets them.
@pytest.mark.serial
async def test_four_processes_drain_20000_exactly_once(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    ids = await venturi.enqueue_many(
        conn, [workertasks.count.job(workertasks.Item(i)) for i in range(20_000)]
    )
    procs = [spawn_worker(dsn, tmp_path, "--concurrency", "8", "--poll-max", "1") for _ in range(4)]
    try:
        await wait_for(lambda: _eq(_completed(conn, ids), 20_000), within=240, every=0.25)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        outs = [await asyncio.to_thread(p.communicate, timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    runs = read_runs(tmp_path)
    per_job = Counter(job for job, _, _ in runs)
    assert len(runs) == 20_000 and set(per_job) == set(ids) and max(per_job.values()) == 1
    assert len({pid for _, _, pid in runs}) >= 2  # the work was shared


async def test_survives_terminated_backends(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    ran: list[int] = []

    @venturi.task(kind="p_terminate")
    async def handler(ctx: venturi.Context[Any], carry: workertasks.Item) -> None:
        ran.append(carry.n)

    first = await handler.enqueue(conn, workertasks.Item(1))
    worker = Worker(None, dsn, [handler], poll_max=30)
    async with running(worker):
        await wait_status(conn, first, "completed")
        await wait_until(lambda: worker.listening)
        terminated = await conn.fetchval(test_sql.statement("backends_terminate"))
        assert terminated >= 1
        # The LISTEN connection comes back; meanwhile polling covers the gap.
        await wait_until(lambda: worker.stats["listen_reconnects"] >= 1)
        second = await handler.enqueue(conn, workertasks.Item(2))
        await wait_status(conn, second, "completed", within=15)
        await wait_until(lambda: worker.listening)
        again = await conn.fetchval(test_sql.statement("backends_terminate"))
        assert again >= 1
        third = await handler.enqueue(conn, workertasks.Item(3))
        await wait_status(conn, third, "completed", within=15)
    assert sorted(ran) == [1, 2, 3]


@pytest.fixture
def cluster() -> Any:
    c = testing.start_cluster()
    if c is None:
        pytest.skip("no PostgreSQL binaries on this machine to start a throwaway cluster")
    yield c
    c.destroy()


# Serial: a cluster of its own, stopped and started under a running worker.
@pytest.mark.serial
async def test_survives_a_postgresql_restart(cluster: testing.Cluster, kinds: list[str]) -> None:
    done: list[int] = []

    @venturi.task(kind="p_restart")
    async def handler(ctx: venturi.Context[Any], carry: workertasks.Item) -> None:
        done.append(carry.n)

    conn = await asyncpg.connect(cluster.dsn)
    await db.schema.apply_schema(conn, schema="venturi")
    first = await handler.enqueue(conn, workertasks.Item(1))
    worker = Worker(None, cluster.dsn, [handler], poll_max=30)
    async with running(worker):
        await wait_status(conn, first, "completed")
        await conn.close()
        await asyncio.to_thread(cluster.restart)
        conn = await asyncpg.connect(cluster.dsn)
        second = await handler.enqueue(conn, workertasks.Item(2))
        await wait_status(conn, second, "completed", within=30)
    await conn.close()
    assert done == [1, 2]
    assert worker.stats["listen_reconnects"] >= 1
