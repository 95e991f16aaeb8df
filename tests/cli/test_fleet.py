"""Operating a fleet: the registry of workers (live, gone, stopped), `venturi workers`,
recovering a gone worker's claims at once, kinds that no live worker runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

import venturi
from tests.support import (
    ROOT,
    assert_one_clean_error,
    events,
    running,
    until_cancelled,
    venturi_cli,
    venturi_cli_async,
    wait_for,
    wait_stat,
    wait_status,
    workertasks,
)
from tests.support.fleet import silence_worker, stop_long_ago
from venturi import admin, db
from venturi.cli import render as views
from venturi.runtime.worker import Worker


def spawn_worker(dsn: str, runs: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "VENTURI_DSN": dsn, "VENTURI_TEST_RUNS_DIR": str(runs)}
    return subprocess.Popen(
        [sys.executable, "-m", "venturi", "worker", "tests.support.workertasks", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def workers_json(dsn: str, *args: str) -> list[dict[str, Any]]:
    out = venturi_cli("workers", "--json", *args, dsn=dsn)
    assert out.returncode == 0, out.stderr
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


async def test_killed_worker_is_gone_and_recover_worker_frees_its_claims_at_once(
    dsn: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    job_id = await workertasks.block.enqueue(conn, workertasks.Item(1))
    # A long lease: without `recover --worker`, its claim would wait 15 minutes.
    victim = spawn_worker(dsn, tmp_path, "--poll-max", "0.2", "--heartbeat", "0.2")
    try:
        await wait_status(conn, job_id, "claimed", within=30)
        [w] = workers_json(dsn)
        assert (w["state"], w["pid"], w["claims"]) == ("live", victim.pid, 1)
        assert "proc_block" in w["kinds"] and w["kinds"] == sorted(w["kinds"])
        assert w["concurrency"] >= 1 and w["version"] == venturi.__version__
        # A live worker is refused: its claims are its own.
        refused = await venturi_cli_async("recover", "--worker", w["id"], dsn=dsn)
        assert_one_clean_error(refused, "is live", "--force")
        assert await _status(conn, job_id) == "claimed"
    finally:
        victim.kill()  # SIGKILL: no clean stop, no release
        await asyncio.to_thread(victim.communicate, timeout=30)
    # Its last heartbeat 40 s ago: gone under the default liveness of 30 s...
    await silence_worker(conn, w["id"], 40)
    [gone] = workers_json(dsn)
    assert (gone["state"], gone["claims"]) == ("gone", 1)
    # ... and live again under a longer one.
    assert workers_json(dsn, "--liveness", "60")[0]["state"] == "live"
    table = venturi_cli("workers", dsn=dsn)
    assert table.returncode == 0 and "gone" in table.stdout and w["id"][:8] in table.stdout

    out = await venturi_cli_async("recover", "--worker", w["id"][:8], dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"job {job_id} (proc_block): claimed -> pending",
        f"recovered 1 claim(s) of worker {w['name']} ({w['id']}, gone)",
    ]
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.status == "pending" and job.failures == 1
    journal = await venturi.get_journal(conn, job_id)
    # Backed off from the recovery, as after a lease expiry: the default backoff's first
    # delay is 0.5-1 s (half-jitter of 1 s).
    assert job.visible_at - journal[-1].at >= timedelta(seconds=0.4)
    assert events(journal) == ["enqueued", "claimed", "stale-recovered"]
    assert f"worker {w['name']} ({w['id']}) gone" in (journal[2].detail or "")
    assert (journal[2].worker or "").startswith("operator:")
    assert workers_json(dsn)[0]["claims"] == 0
    # Counted as a failure like any recovery.
    stats = await admin.stats(conn)
    assert next(k for k in stats.kinds if k.kind == "proc_block").failures_recent == 1


async def test_recover_worker_force_and_bad_input(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()

    @venturi.task(kind="fleet_hang")
    async def hang(ctx: venturi.Context[None], carry: None) -> None:
        started.set()
        await until_cancelled()

    job_id = await hang.enqueue(conn, None)
    w = Worker(None, dsn, [hang], poll_max=0.2, shutdown_timeout=0.5)
    async with running(w):
        await asyncio.wait_for(started.wait(), 30)
        [me] = await admin.list_workers(conn)
        assert me.state == "live" and me.claims == 1
        out = await venturi_cli_async("recover", "--worker", str(me.id), "--force", dsn=dsn)
        assert out.returncode == 0, out.stderr
        assert await _status(conn, job_id) == "pending"
        # The handler, its claim lost, is asked to stop by the heartbeat.
        await wait_stat(w, "claims_lost", 1, within=30)
    for args, fragment in (
        (("--worker", "ffffffff"), "no worker has id or name 'ffffffff'"),
        (("--force",), "--force goes with --worker"),
        (("--worker", str(me.id), "--liveness", "0"), "liveness must be positive"),
        (("--worker", str(me.id), "--liveness", "nan"), "liveness must be finite"),
    ):
        assert_one_clean_error(await venturi_cli_async("recover", *args, dsn=dsn), fragment)
    assert_one_clean_error(venturi_cli("workers", "--liveness", "-1", dsn=dsn), "liveness")


async def test_idle_worker_is_listed_and_a_clean_stop_marks_it_stopped(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="fleet_idle")
    async def idle(ctx: venturi.Context[None], carry: None) -> None:
        pass

    w = Worker(None, dsn, [idle], poll_max=0.2, heartbeat=0.1, claimed_by="idle-one")
    async with running(w):
        await wait_stat(w, "empty_claims", 1)
        [me] = await admin.list_workers(conn)
        assert (me.name, me.state, me.claims, me.kinds) == ("idle-one", "live", 0, ["fleet_idle"])
        first = me.heartbeat_at
        assert first is not None

        async def beat() -> bool:
            [now] = await admin.list_workers(conn)
            return now.heartbeat_at is not None and now.heartbeat_at > first

        await wait_for(beat)  # the heartbeat pushes it forward while idle
        # An idle worker shows in stats and top.
        stats, frame = await admin.stats(conn), await admin.top_frame(conn)
        assert [x.name for x in stats.workers] == [x.name for x in frame.workers] == ["idle-one"]
        text = _render(views.stats(stats))
        assert "idle-one" in text and "live" in text
    [me] = await admin.list_workers(conn)
    assert me.state == "stopped" and me.stopped_at is not None
    # Stopped workers leave stats and top, and stay in `venturi workers`.
    assert (await admin.stats(conn)).workers == []
    assert [x["state"] for x in workers_json(dsn)] == ["stopped"]


async def test_long_stopped_workers_are_pruned_as_a_worker_registers(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="fleet_prune")
    async def prune(ctx: venturi.Context[None], carry: None) -> None:
        pass

    for name in ("old-a", "old-b"):
        w = Worker(None, dsn, [prune], poll_max=0.2, claimed_by=name)
        async with running(w):
            await wait_stat(w, "empty_claims", 1)
    [a, b] = sorted(await admin.list_workers(conn), key=lambda x: x.name)
    await stop_long_ago(conn, a.id, 2 * 86_400)  # two days: pruned
    await stop_long_ago(conn, b.id, 3_600)  # an hour: kept
    w = Worker(None, dsn, [prune], poll_max=0.2, claimed_by="new")
    async with running(w):
        await wait_stat(w, "empty_claims", 1)
        names = sorted(x.name for x in await admin.list_workers(conn))
    assert names == ["new", "old-b"]
    # Retention prunes on its own period: an hour-old stop is past a minute's.
    keep = venturi.Retention(completed=None, dead=None, cancelled=None, workers=60)
    w = Worker(None, dsn, [prune], poll_max=0.2, claimed_by="newer", maintenance=[keep])
    async with running(w):
        await wait_stat(w, "maintenance_runs:retention", 1)
        names = sorted(x.name for x in await admin.list_workers(conn))
    assert names == ["new", "newer"] and w.stats["retention_deleted:workers"] == 1
    assert await db.workers.worker_prune(conn, schema="venturi", older_than=0.0) == 2


async def test_a_kind_without_a_live_worker_is_flagged_until_one_starts(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="fleet_orphan")
    async def orphan(ctx: venturi.Context[None], carry: None) -> None:
        await until_cancelled()

    @venturi.task(kind="fleet_other")
    async def other(ctx: venturi.Context[None], carry: None) -> None:
        pass

    await orphan.enqueue(conn, None)
    flagged = await _flags(conn)
    assert flagged["fleet_orphan"] == (False, True)
    out = venturi_cli("stats", dsn=dsn)
    assert "no live worker" in _line(out.stdout, "fleet_orphan")
    top = venturi_cli("top", "--once", dsn=dsn)
    assert "no live worker" in _line(top.stdout, "fleet_orphan")
    # A worker that registers another kind only does not help.
    w = Worker(None, dsn, [other], poll_max=0.2)
    async with running(w):
        await wait_stat(w, "empty_claims", 1)
        assert (await _flags(conn))["fleet_orphan"] == (False, True)
    # A paused kind is shown as paused.
    paused = venturi_cli("kinds", "pause", "fleet_orphan", dsn=dsn)
    assert paused.returncode == 0, paused.stderr
    assert (await _flags(conn))["fleet_orphan"] == (True, True)
    assert "paused" in _line(venturi_cli("stats", dsn=dsn).stdout, "fleet_orphan")
    assert "paused" in _line(venturi_cli("top", "--once", dsn=dsn).stdout, "fleet_orphan")
    assert venturi_cli("kinds", "resume", "fleet_orphan", dsn=dsn).returncode == 0
    w = Worker(None, dsn, [orphan], poll_max=0.2, shutdown_timeout=0.1)
    async with running(w):
        await wait_stat(w, "claimed", 1)
        await orphan.enqueue(conn, None)  # due, and now a live worker registers it
        assert (await _flags(conn))["fleet_orphan"] == (False, False)
        assert "no live worker" not in _line(venturi_cli("stats", dsn=dsn).stdout, "fleet_orphan")
        data = json.loads(venturi_cli("stats", "--json", dsn=dsn).stdout)
        assert [k["no_live_worker"] for k in data["kinds"] if k["kind"] == "fleet_orphan"] == [
            False
        ]


async def _flags(conn: Any) -> dict[str, tuple[bool, bool]]:
    stats, frame = await admin.stats(conn), await admin.top_frame(conn)
    a = {k.kind: (k.paused, k.no_live_worker) for k in stats.kinds}
    b = {k.kind: (k.paused, k.no_live_worker) for k in frame.kinds}
    assert a == b
    return a


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start + " "))


def _render(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


async def _status(conn: Any, job_id: int) -> str | None:
    job = await venturi.get_job(conn, job_id)
    return None if job is None else job.status
