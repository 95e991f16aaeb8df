"""venturi in a Django project (``venturi.contrib.django``), against a real database: enqueue
on Django's connection inside and outside ``atomic()`` on psycopg 3 and psycopg2, the app's
migration and ``manage.py venturi``. ``VenturiBackend`` under Django's Tasks framework has
its own module (tests/integration/test_django_tasks.py).

Django's settings are configured once per process, so each test runs a scenario of
``tests/support/django_app/scenarios.py`` (or ``manage.py``) in a subprocess on this test's
database; the parent checks the database itself, and runs the worker where the scenario
does not.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

import asyncpg
import pytest

import venturi
from tests.support import sql as tsql
from tests.support.carries import Item
from tests.support.cli import ROOT
from tests.support.django_app import jobs
from tests.support.django_app.run import DRIVERS, MANAGE, environment, manage, scenario
from tests.support.waits import wait_for, wait_stat, wait_until
from tests.support.workers import running
from venturi import Worker, db, sql, testing

# --- enqueue on Django's connection, per driver ---------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
async def test_django_runs_on_the_driver_asked_for(dsn: str, driver: str) -> None:
    found = await scenario("driver", dsn, driver)
    assert found["driver"] == driver
    assert found["dsn"].endswith("/" + dsn.rsplit("/", 1)[1])


@pytest.mark.parametrize("driver", DRIVERS)
async def test_rollback_of_the_atomic_block_writes_nothing(
    dsn: str, conn: asyncpg.Connection, driver: str
) -> None:
    found = await scenario("rollback", dsn, driver)
    assert found["seen_inside"] is True and found["after"] is None
    assert await venturi.get_job(conn, found["id"]) is None
    assert await conn.fetchval(tsql.statement("jobs_count")) == 0


@pytest.mark.parametrize("driver", DRIVERS)
async def test_commit_then_a_worker_runs_it(
    dsn: str, conn: asyncpg.Connection, driver: str, kinds: list[str]
) -> None:
    found = await scenario("commit", dsn, driver)
    assert found["in_atomic"] is False
    ran = await testing.drain(conn, [jobs.note])
    assert sorted(ran) == sorted(found["ids"])
    assert {j.status for j in ran.values()} == {"completed"}


@pytest.mark.parametrize("driver", DRIVERS)
async def test_wrong_carry_is_a_type_error_before_any_write(
    dsn: str, conn: asyncpg.Connection, driver: str
) -> None:
    found = await scenario("wrong_carry", dsn, driver)
    assert found["errors"] == ["TypeError", "TypeError"]
    assert await conn.fetchval(tsql.statement("jobs_count")) == 1  # only the one after


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_key_taken_through_asyncpg_is_the_same_job_through_django(
    dsn: str, conn: asyncpg.Connection, driver: str, kinds: list[str]
) -> None:
    held = await jobs.note.enqueue(conn, Item(1), key="held")
    found = await scenario("key", dsn, driver, VENTURI_TEST_HELD=str(held))
    assert found["same"] == held
    assert await jobs.note.enqueue(conn, Item(2), key="mine") == found["mine"]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_the_notification_wakes_an_idle_worker(
    dsn: str, conn: asyncpg.Connection, driver: str
) -> None:
    # Polling every 60 s: only the notification wakes it within the wait.
    worker = Worker(None, dsn, [jobs.note], poll_max=60)
    async with running(worker):
        await wait_until(lambda: worker.listening)
        await wait_stat(worker, "empty_claims", 1)
        found = await scenario("enqueue_one", dsn, driver)

        async def done() -> bool:
            job = await venturi.get_job(conn, found["id"])
            return job is not None and job.status == "completed"

        await wait_for(done, within=20)


async def test_get_job_and_journal_through_django(dsn: str) -> None:
    found = await scenario("journal", dsn)
    assert found["status"] == "completed" and found["result"] == {"noted": 1}
    assert found["events"] == ["enqueued", "claimed", "completed"]


# --- the app: migrate, manage.py venturi ----------------------------------------------


async def test_manage_venturi_worker_help_describes_each_option(dsn: str) -> None:
    out = await manage(dsn, "venturi", "worker", "--help")
    assert out.returncode == 0, out.stderr
    assert "Run a worker on the project's database" in out.stdout
    described = out.stdout.split("options:", 1)[1]
    for flag, words in (
        ("--queue NAME", "A Django queue to run"),
        ("--concurrency", "In-flight jobs"),
        ("--poll-max", "Longest idle wait, seconds (default 30.0)"),
        ("--lease", "Default lease, seconds (default 900.0)"),
        ("--shutdown-timeout", "Grace before force-release"),
        ("--priority-ratio", "Anti-starvation ratio"),
        ("--renew-lease", "Extend running jobs' leases"),
        ("--heartbeat", "Seconds between checks of running jobs"),
        ("--metrics-port", "Serve Prometheus metrics"),
        ("--no-synchronous-commit", "Claims and completions do not wait for their WAL flush"),
        ("--log-level", "debug, info"),
    ):
        assert flag in described and words in " ".join(described.split()), (flag, out.stdout)


async def test_migrate_applies_the_schema(empty_dsn: str) -> None:
    done = await manage(empty_dsn, "migrate", "venturi")
    assert done.returncode == 0, done.stderr
    assert "Applying venturi.0001_venturi_schema... OK" in done.stdout
    c = await asyncpg.connect(empty_dsn)
    try:
        latest = sql.migrations()[-1].version
        assert await db.schema.schema_version(c, schema="venturi") == latest
    finally:
        await c.close()


async def test_a_later_venturi_is_upgraded_by_migrate_without_a_django_migration(
    empty_dsn: str,
) -> None:
    """The app's migration ran under an older venturi (here: the schema at version 1 and
    the Django migration recorded as applied): the next ``migrate`` has no Django
    migration to run for venturi, and still brings the schema to this venturi's latest."""
    c = await asyncpg.connect(empty_dsn)
    try:
        first = sql.migrations()[0]
        await c.execute(first.sql)
        await c.execute(sql.statement("schema_version_record"), first.version, first.name)
        with pytest.raises(venturi.SchemaError, match="at version 1"):
            await db.schema.schema_version(c, schema="venturi")
        fake = await manage(empty_dsn, "migrate", "venturi", "--fake")
        assert fake.returncode == 0, fake.stderr
        again = await manage(empty_dsn, "migrate")
        assert again.returncode == 0, again.stderr
        assert "Applying venturi" not in again.stdout
        latest = sql.migrations()[-1].version
        assert await db.schema.schema_version(c, schema="venturi") == latest
    finally:
        await c.close()


async def test_manage_venturi_schema_apply_and_venturis_own_commands(empty_dsn: str) -> None:
    first = await manage(empty_dsn, "venturi", "schema", "apply", driver="psycopg2")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("schema venturi: applied migration(s) 1, ")
    second = await manage(empty_dsn, "venturi", "schema", "apply")
    assert second.stdout.strip() == "schema venturi: up to date"
    # Any other command is venturi's own, on the project's database.
    listed = await manage(empty_dsn, "venturi", "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


async def test_manage_venturi_errors_are_one_line_and_exit_non_zero(empty_dsn: str) -> None:
    """As the plain ``venturi`` exits: its one line, a non-zero code, no traceback; and
    inside Django the missing schema's fix is ``manage.py migrate``."""
    for args in (("stats",), ("jobs", "show", "1"), ("jobs", "list")):
        done = await manage(empty_dsn, "venturi", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert done.stderr.strip().splitlines() == [
            "venturi: the venturi schema 'venturi' is not applied to this database: "
            "run `manage.py migrate`"
        ], args
    await manage(empty_dsn, "venturi", "schema", "apply")
    missing = await manage(empty_dsn, "venturi", "jobs", "show", "999")
    assert missing.returncode == 2
    assert missing.stderr.strip() == "venturi: job 999 does not exist"
    usage = await manage(empty_dsn, "venturi", "jobs", "list", "--bogus")
    assert usage.returncode == 2 and "No such option: --bogus" in usage.stderr
    for done in (missing, usage):
        assert "Traceback" not in done.stderr and "Exit" not in done.stderr


async def test_manage_venturi_schema_apply_refused_by_the_database_is_one_line(
    empty_dsn: str,
) -> None:
    # A read-only database (a standby, a full disk), as a held lock: it was a 26-line
    # traceback, exit 1 (upgrade probe); the plain venturi schema apply says one line.
    import asyncpg

    from tests.support import sql as tsql

    c = await asyncpg.connect(empty_dsn)
    try:
        await c.execute(tsql.statement("database_read_only"))
    finally:
        await c.close()
    done = await manage(empty_dsn, "venturi", "schema", "apply")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("venturi: ") and "read-only" in line, line


async def test_settings_may_follow_the_subcommand(dsn: str) -> None:
    """Django reads ``--settings`` wherever it stands; venturi's commands (and the worker)
    must not take it for one of theirs. The environment names no usable settings, so
    only the option makes the command work."""
    settings = "tests.support.django_app.settings"
    nowhere = {"DJANGO_SETTINGS_MODULE": "no.such.settings"}
    for args in (
        ("venturi", "jobs", "list", "--json", "--settings", settings),
        ("venturi", "jobs", "list", "--settings", settings, "--json"),
        ("venturi", "stats", f"--settings={settings}"),
        ("venturi", "--settings", settings, "jobs", "list", "--json"),
    ):
        done = await manage(dsn, *args, **nowhere)
        assert done.returncode == 0, (args, done.stderr)
        if "--json" in args:  # the listing itself, not only an exit status
            assert json.loads(done.stdout) == [], (args, done.stdout)


async def test_manage_venturi_worker_runs_venturi_and_django_tasks(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    note = await scenario("enqueue_one", dsn)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(MANAGE),
        "venturi",
        "worker",
        "tests.support.django_app.jobs",
        "--poll-max",
        "1",
        cwd=ROOT,
        env=environment(dsn),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def done(job_id: int) -> bool:
            job = await venturi.get_job(conn, job_id)
            return job is not None and job.status == "completed"

        await wait_for(lambda: done(note["id"]), within=60)
        # A Django task enqueued while the worker runs: the worker runs every queue of
        # TASKS beside the module's tasks.
        found = await scenario("tasks_enqueue_add", dsn)
        await wait_for(lambda: done(int(found["id"])), within=60)
        job = await venturi.get_job(conn, int(found["id"]))
        assert job is not None and job.result == 5
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "django.default" in out.decode() and "django.reports" in out.decode()
    assert "dj_note" in out.decode()


async def test_manage_venturi_worker_without_a_module_runs_every_django_queue(
    dsn: str, conn: asyncpg.Connection
) -> None:
    found = await scenario("tasks_enqueue_add", dsn)
    # --settings after the subcommand, as Django users write it (the environment's
    # settings do not exist): Django's option, not one for the worker's parser.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(MANAGE),
        "venturi",
        "worker",
        "--settings",
        "tests.support.django_app.settings",
        cwd=ROOT,
        env=environment(dsn, DJANGO_SETTINGS_MODULE="no.such.settings"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def done() -> bool:
            job = await venturi.get_job(conn, int(found["id"]))
            return job is not None and job.status == "completed"

        await wait_for(done, within=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "venturi worker: django.default, django.reports" in out.decode()
