"""The command line: schema render offline, apply with one-line errors."""

from __future__ import annotations

import sys
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item as C
from tests.support import events, expire_claim, running, venturi_cli, venturi_cli_async, wait_status
from tests.support.carries import noop_task
from tests.support.claims import claim
from tests.support.cli import UNREACHABLE, one_line_error
from tests.support.schemas import migrated_to
from venturi import Worker, db, sql
from venturi.db.enqueue import JobSpec


def test_schema_render_matches_the_library() -> None:
    out = venturi_cli("schema", "render")
    assert out.returncode == 0, out.stderr
    assert out.stdout == sql.render("venturi", "all")
    part = venturi_cli("schema", "render", "--schema", "other", "--part", "indexes")
    assert part.returncode == 0
    assert part.stdout == sql.render("other", "indexes")


def test_schema_render_never_connects() -> None:
    # A DSN that cannot work: render must not care.
    env = {"VENTURI_DSN": "postgresql://nobody@127.0.0.1:1/none", "PATH": "/usr/bin:/bin"}
    out = venturi_cli("schema", "render", "--part", "claim", env=env)
    assert out.returncode == 0
    assert "PREPARE venturi_job_claim(" in out.stdout


def test_invalid_schema_name_is_one_line() -> None:
    out = venturi_cli("schema", "render", "--schema", "Bad-Name")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "schema must be" in out.stderr


def test_unreachable_dsn_is_one_line_without_password() -> None:
    out = venturi_cli("schema", "apply", "--dsn", "postgresql://me:s3cret@127.0.0.1:1/db")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert "cannot connect to postgresql://me:***@127.0.0.1:1/db" in out.stderr
    assert "s3cret" not in out.stderr and "Traceback" not in out.stderr


def test_missing_dsn() -> None:
    env = {"PATH": "/usr/bin:/bin"}
    out = venturi_cli("schema", "apply", env=env)
    assert out.returncode == 2 and "VENTURI_DSN" in out.stderr


async def test_schema_apply_via_cli(empty_dsn: str) -> None:
    first = venturi_cli("schema", "apply", "--dsn", empty_dsn)
    assert first.returncode == 0, first.stderr
    every = ", ".join(str(m.version) for m in sql.migrations())
    assert f"applied migration(s) {every}" in first.stdout
    second = venturi_cli("schema", "apply", env={"VENTURI_DSN": empty_dsn, "PATH": "/usr/bin:/bin"})
    assert second.returncode == 0 and "up to date" in second.stdout
    conn = await asyncpg.connect(empty_dsn)
    try:
        assert (
            await db.schema.schema_version(conn, schema="venturi") == sql.migrations()[-1].version
        )
    finally:
        await conn.close()


async def test_a_sqlalchemy_url_is_taken_as_a_dsn(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    """The URL an application already holds for SQLAlchemy names its driver in the
    scheme: venturi drops it wherever it takes a DSN (the CLI, a Worker, its connects)."""
    assert dsn.startswith("postgresql://")
    rest = dsn.removeprefix("postgresql://")
    for scheme in ("postgresql+asyncpg", "postgresql+psycopg", "postgres+psycopg2"):
        listed = await venturi_cli_async("jobs", "list", "--json", dsn=f"{scheme}://{rest}")
        assert listed.returncode == 0, (scheme, listed.stderr)
        assert listed.stdout.strip() == "[]"
        c = await db.connect.connect(f"{scheme}://{rest}")
        try:
            assert await db.schema.schema_version(c, schema="venturi") >= 1
        finally:
            await c.close()

    @venturi.task(kind="sqlalchemy_url")
    async def noop(ctx: venturi.Context[Any], carry: C) -> None:
        pass

    job_id = await noop.enqueue(conn, C(1))
    async with running(Worker(None, f"postgresql+asyncpg://{rest}", [noop])):
        await wait_status(conn, job_id, "completed", within=30)


def test_redact() -> None:
    assert (
        db.connect.redact("postgresql://u:pw@h:5/d?sslmode=x")
        == "postgresql://u:***@h:5/d?sslmode=x"
    )
    assert db.connect.redact("postgresql://u@h/d?password=pw") == "postgresql://u@h/d?password=***"
    assert db.connect.redact("postgresql://h/d") == "postgresql://h/d"


async def test_demo_on_a_given_database(dsn: str) -> None:

    out = await venturi_cli_async("demo", "--dsn", dsn, "--jobs", "40")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "enqueued 60 jobs (40 fetches, 20 emails)" in lines
    table = {
        tuple(line.split()[:2]): int(line.split()[2])
        for line in lines
        if line.startswith(("fetch_", "send_"))
    }
    assert table == {
        ("fetch_bookmark", "completed"): 39,
        ("fetch_bookmark", "dead"): 1,
        ("send_email", "completed"): 20,
    }
    assert "emails in the outbox: 20; pages titled: 39" in lines
    conn = await asyncpg.connect(dsn)
    try:
        rows = await db.reads.job_counts(conn, schema="venturi")
        # Long pages paused and flaky pages retried on their way to completion.
        assert sum(r["jobs"] for r in rows) == 60
    finally:
        await conn.close()


@pytest.mark.skipif(
    sys.version_info >= (3, 13), reason="pgserver (the embedded extra) has no wheel for 3.13"
)
def test_demo_on_the_embedded_database() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k != "VENTURI_DSN"}
    out = venturi_cli("demo", "--jobs", "20", env=env)
    assert out.returncode == 0, out.stderr
    assert "starting the embedded PostgreSQL" in out.stderr
    assert "fetch_bookmark  completed       19" in out.stdout


async def test_recover_command(conn: asyncpg.Connection, dsn: str, kinds: list[str]) -> None:

    import venturi as v

    @v.task(kind="cli_recover")
    async def handler(ctx: v.Context[object], carry: C) -> None:
        return None

    job_id = await handler.enqueue(conn, C(1))
    await claim(conn, db.Claimant("gone:1"), ["cli_recover"], lease=0.001)
    await expire_claim(conn, job_id)
    out = await venturi_cli_async("recover", "--dsn", dsn)
    assert out.returncode == 0, out.stderr
    assert f"job {job_id} (cli_recover): pending, claimed by gone:1" in out.stdout
    assert "recovered 1 expired claim(s)" in out.stdout
    journal = await v.get_journal(conn, job_id)
    assert events(journal)[-1] == "stale-recovered"


async def test_kinds_pause_resume_list(dsn: str) -> None:
    import json

    paused = await venturi_cli_async(
        "kinds", "pause", "emails", "reports", "--reason", "smtp down", "--dsn", dsn
    )
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.splitlines() == ["paused emails (smtp down)", "paused reports (smtp down)"]
    listed = await venturi_cli_async("kinds", "list", "--json", "--dsn", dsn)
    data = json.loads(listed.stdout)
    assert [(d["kind"], d["reason"]) for d in data] == [
        ("emails", "smtp down"),
        ("reports", "smtp down"),
    ]
    resumed = await venturi_cli_async("kinds", "resume", "emails", "nothing", "--dsn", dsn)
    assert resumed.stdout.splitlines() == ["resumed emails", "nothing was not paused"]
    conn = await asyncpg.connect(dsn)
    try:
        assert [r["kind"] for r in await db.kinds.kind_paused_list(conn, schema="venturi")] == [
            "reports"
        ]
    finally:
        await conn.close()
    text = await venturi_cli_async("kinds", "list", "--dsn", dsn)
    [header, reports] = text.stdout.splitlines()
    assert header.split() == ["kind", "state", "paused", "at", "by", "reason"]
    assert reports.split()[:2] == ["reports", "paused"] and reports.rstrip().endswith("smtp down")


async def test_kinds_list_shows_every_kind_and_which_are_paused(
    dsn: str, conn: asyncpg.Connection
) -> None:
    import json

    empty = await venturi_cli_async("kinds", "list", "--dsn", dsn)
    assert empty.returncode == 0 and empty.stdout == (
        "no kinds: no job, schedule, worker or pause names one yet\n"
    )
    await db.enqueue.job_insert_many(
        conn,
        schema="venturi",
        specs=[JobSpec(k, "null", 1, None, None, None, 25) for k in ("mail", "fetch", "mail")],
    )
    paused = await venturi_cli_async("kinds", "pause", "mail", "--reason", "smtp down", dsn=dsn)
    assert paused.returncode == 0, paused.stderr
    text = await venturi_cli_async("kinds", "list", "--dsn", dsn)
    assert text.returncode == 0, text.stderr
    rows = [line.split() for line in text.stdout.splitlines()[1:]]
    assert [r[:2] for r in rows] == [["fetch", "active"], ["mail", "paused"]], text.stdout
    assert text.stdout.rstrip().endswith("smtp down")
    listed = json.loads((await venturi_cli_async("kinds", "list", "--json", dsn=dsn)).stdout)
    assert [(k["kind"], k["paused"], k["reason"]) for k in listed] == [
        ("fetch", False, None),
        ("mail", True, "smtp down"),
    ]


def test_help_lists_each_command_on_one_line_when_the_terminal_is_wide() -> None:
    # Wide enough for every summary: a second line can only be a break in the source
    # docstring, which printed mid-sentence.
    out = venturi_cli("--help", env={"COLUMNS": "400"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line)
    rows = [line for line in lines[start + 1 :] if line.startswith("│")]
    for row in rows:
        assert not row.startswith("│  "), f"a summary broken over lines: {row!r}"
    names = {row.split()[1] for row in rows}
    assert {"recover", "stats", "workers", "top", "metrics", "web", "worker"} <= names
    [recover] = [r for r in rows if r.startswith("│ recover ")]
    assert "with --worker, the claims of one worker that is gone, at once." in recover


def test_worker_usage_names_module_and_state() -> None:
    out = venturi_cli("worker", "--help", env={"COLUMNS": "120"})
    [usage] = [line for line in out.stdout.splitlines() if "Usage:" in line]
    assert "MODULE[:STATE]" in usage and "target" not in usage.lower(), usage


def test_worker_help_lists_the_options() -> None:
    out = venturi_cli("worker", "--help")
    for flag in (
        "--concurrency",
        "--renew-lease",
        "--heartbeat",
        "--metrics-port",
        "--processes",
        "--synchronous-commit",  # the help's narrow column cuts its --no- twin short
    ):
        assert flag in out.stdout, flag


async def test_cli_apply_that_cannot_take_its_locks_is_one_line(
    empty_dsn: str, kinds: list[str]
) -> None:
    plain = noop_task("cli_upgrade_plain")
    setup = await asyncpg.connect(empty_dsn)
    web = await asyncpg.connect(empty_dsn, server_settings={"application_name": "shop-web"})
    try:
        await migrated_to(setup, 23)
        async with web.transaction():
            # An application of an older release (this one enqueues only on a schema of
            # its own version); a bulk enqueue without keys writes the columns 23 has.
            await venturi.enqueue_many(web, [plain.job(C(1))])
            out = await venturi_cli_async("schema", "apply", "--lock-timeout", "0.2", dsn=empty_dsn)
        one_line_error(out, f"pid {web.get_server_pid()}", "shop-web", "nothing was applied")
        done = await venturi_cli_async("schema", "apply", "--lock-timeout", "0.2", dsn=empty_dsn)
        assert done.returncode == 0 and "applied migration(s) 24" in done.stdout, done.stderr
    finally:
        for c in (setup, web):
            await c.close()


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_cli_apply_refuses_a_bad_lock_timeout(bad: str) -> None:
    out = venturi_cli("schema", "apply", "--lock-timeout", bad, dsn=UNREACHABLE)
    one_line_error(out, "lock_timeout")
