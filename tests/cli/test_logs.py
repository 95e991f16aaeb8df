"""`venturi worker --log-format text|json`: every line of a real worker process, and the
fields of the lines about jobs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import asyncpg

import venturi
from tests.support import ROOT, assert_one_clean_error, logtasks, venturi_cli, wait_for, wait_status


def spawn(dsn: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "VENTURI_DSN": dsn}
    return subprocess.Popen(
        [sys.executable, "-m", "venturi", "worker", "tests.support.logtasks", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


async def _run_both(dsn: str, conn: asyncpg.Connection, fmt: str) -> tuple[int, int, str]:
    talk = await logtasks.talk.enqueue(conn, logtasks.Item(7))
    fail = await logtasks.fail.enqueue(conn, logtasks.Item(9))
    proc = spawn(dsn, "--log-format", fmt, "--poll-max", "0.2")
    try:
        await wait_status(conn, talk, "completed", within=30)

        async def failed_once() -> bool:
            job = await venturi.get_job(conn, fail)
            return job is not None and job.failures >= 1

        await wait_for(failed_once, within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    return talk, fail, out


async def test_json_lines_parse_and_job_lines_carry_the_job(
    dsn: str, conn: asyncpg.Connection
) -> None:
    talk, fail, out = await _run_both(dsn, conn, "json")
    # The signal notice is the CLI's own stderr line, not a log record.
    lines = [line for line in out.splitlines() if not line.startswith("venturi: stopping")]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    said = next(r for r in records if r["message"] == "charging card 7")
    assert (said["job_id"], said["kind"], said["attempt"], said["logger"]) == (
        talk,
        "log_talk",
        1,
        "venturi.job",
    )
    failure = next(r for r in records if r.get("job_id") == fail and "failed" in r["message"])
    assert (failure["kind"], failure["attempt"]) == ("log_fail", 1)
    assert (failure["error_type"], failure["error_message"]) == ("ValueError", "card 9 declined")
    assert "ValueError: card 9 declined" in failure["message"]
    assert "Traceback" not in failure["message"]  # the traceback stays in the journal
    # Every record that names a job carries its three fields.
    for r in records:
        if r["message"].startswith("job ") or "job_id" in r:
            assert {"job_id", "kind", "attempt"} <= set(r), r
    started = next(r for r in records if " started: " in r["message"])
    stopped = next(r for r in records if " stopped after " in r["message"])
    assert "{" not in stopped["message"] and "ran " in stopped["message"], stopped
    assert "1 completed" in stopped["message"] and "failed" in stopped["message"]
    assert started["logger"] == stopped["logger"] == "venturi.worker"


async def test_text_lines_end_with_the_job_fields(dsn: str, conn: asyncpg.Connection) -> None:
    talk, fail, out = await _run_both(dsn, conn, "text")
    said = next(line for line in out.splitlines() if "charging card 7" in line)
    assert said.endswith(f"[job_id={talk} kind=log_talk attempt=1]"), said
    failure = next(line for line in out.splitlines() if f"job {fail} (log_fail)" in line)
    assert "failed: ValueError: card 9 declined; retry in" in failure, failure
    stopped = next(line for line in out.splitlines() if " stopped after " in line)
    assert "{" not in stopped


async def test_a_job_going_dead_is_a_warning(dsn: str, conn: asyncpg.Connection) -> None:
    """Alerting on WARNING must see every job that will not run again: dead at the failure
    backstop (raised, or asked for a retry), or declared dead; a failure that will be
    retried stays INFO."""
    ids = {
        await logtasks.last_try.enqueue(conn, logtasks.Item(1)): "raised",
        await logtasks.give_up.enqueue(conn, logtasks.Item(2)): "declared",
        await logtasks.retry_out.enqueue(conn, logtasks.Item(3)): "retried",
    }
    retried = await logtasks.fail.enqueue(conn, logtasks.Item(4))
    proc = spawn(dsn, "--log-format", "json", "--poll-max", "0.2")
    try:
        for job_id in ids:
            await wait_status(conn, job_id, "dead", within=30)

        async def failed_once() -> bool:
            job = await venturi.get_job(conn, retried)
            return job is not None and job.failures >= 1

        await wait_for(failed_once, within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for job_id, how in ids.items():
        [line] = [r for r in records if r.get("job_id") == job_id and "now dead" in r["message"]]
        assert line["level"] == "warning", (how, line)
    [again] = [r for r in records if r.get("job_id") == retried and "retry in" in r["message"]]
    assert again["level"] == "info", again
    dead = next(r for r in records if r.get("job_id") in ids and "stolen" in r["message"])
    assert dead["error_message"] == "card 2 is stolen", dead


async def test_an_exception_of_many_lines_reads_whole_on_one_line(
    dsn: str, conn: asyncpg.Connection
) -> None:
    """A message of several lines (pydantic's, asyncpg's) gave the failure line and the
    jobs list its last line alone, without the exception's type ("Error: Input should
    be > 0"): the whole exception, on one line, as ChildFailed reads it."""
    job_id = await logtasks.many_lines.enqueue(conn, logtasks.Item(5))
    proc = spawn(dsn, "--log-format", "json", "--poll-max", "0.2")
    try:
        await wait_status(conn, job_id, "dead", within=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [line] = [r for r in records if r.get("job_id") == job_id and "now dead" in r["message"]]
    whole = "1 validation error for Order 5 quantity Input should be > 0"
    assert (line["error_type"], line["error_message"]) == ("ValueError", whole), line
    assert f"ValueError: {whole}; now dead" in line["message"], line
    listed = venturi_cli("jobs", "list", "--status", "dead", dsn=dsn, env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in listed.stdout.splitlines() if r.lstrip().startswith(str(job_id)))
    assert "ValueError: 1 validation error for Order 5" in row, listed.stdout


def test_bad_log_format_is_one_line(dsn: str) -> None:
    out = venturi_cli("worker", "tests.support.logtasks", "--log-format", "xml", dsn=dsn)
    assert_one_clean_error(out, "log-format must be text or json, got 'xml'")
