"""venturi in a Django project (``venturi.contrib.django``), against a real database: enqueue
on Django's connection inside and outside ``atomic()`` on psycopg 3 and psycopg2, the app's
migration and ``manage.py venturi``, and ``VenturiBackend`` under Django's Tasks framework
as its documentation describes a backend.

Django's settings are configured once per process, so each test runs a scenario of
``tests/support/django_app/scenarios.py`` (or ``manage.py``) in a subprocess on this test's
database; the parent checks the database itself, and runs the worker where the scenario
does not.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any

import asyncpg
import django
import pytest

import venturi
from tests.support import sql as tsql
from tests.support.carries import Item
from tests.support.cli import ROOT
from tests.support.django_app import jobs
from tests.support.waits import wait_for, wait_stat, wait_until
from tests.support.workers import running
from venturi import Worker, db, sql, testing

DRIVERS = ["psycopg", "psycopg2"]
MANAGE = ROOT / "tests" / "support" / "django_app" / "manage.py"


def _env(dsn: str, driver: str = "psycopg", **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "VENTURI_DJANGO_DSN": dsn,
        "VENTURI_DJANGO_DRIVER": driver,
        "DJANGO_SETTINGS_MODULE": "tests.support.django_app.settings",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


async def scenario(name: str, dsn: str, driver: str = "psycopg", **extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.django_app.scenarios",
        name,
        cwd=ROOT,
        env=_env(dsn, driver, **extra),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, f"{name}:\n{out.decode()}\n{err.decode()}"
    found: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return found


async def manage(
    dsn: str, *args: str, driver: str = "psycopg", **extra: str
) -> subprocess.CompletedProcess[str]:
    def go() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(MANAGE), *args],
            cwd=ROOT,
            env=_env(dsn, driver, **extra),
            capture_output=True,
            text=True,
            timeout=180,
        )

    return await asyncio.to_thread(go)


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
        env=_env(dsn),
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
        env=_env(dsn, DJANGO_SETTINGS_MODULE="no.such.settings"),
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


# --- VenturiBackend under Django's Tasks framework ------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
async def test_a_task_result_round_trip(dsn: str, driver: str) -> None:
    found = await scenario("tasks_roundtrip", dsn, driver)
    assert found["id"].isdigit()
    assert found["enqueued_status"] == "READY"
    assert found["kind"] == "django.default" and found["priority"] == venturi.Priority.NORMAL
    assert found["status"] == "SUCCESSFUL" and found["return_value"] == 5
    assert found["finished"] is True and found["attempts"] == 1 and found["worker_ids"] == 1
    assert found["started"] is True and found["args"] == [2, 3]
    assert found["signals"] == [
        ["task_enqueued", "READY"],
        ["task_started", "RUNNING"],
        ["task_finished", "SUCCESSFUL"],
    ]


async def test_enqueue_commits_and_rolls_back_with_the_atomic_block(dsn: str) -> None:
    found = await scenario("tasks_atomic", dsn)
    assert found == {"rolled_back_gone": True, "kept": "READY"}


async def test_a_task_that_raises_is_failed_at_once_with_its_error(
    dsn: str, conn: asyncpg.Connection
) -> None:
    found = await scenario("tasks_failure", dsn)
    assert found["status"] == "FAILED" and found["raised"] == "Task failed"
    assert found["errors"] == [["tests.support.django_app.tasks.Refused", True]]
    assert found["class_ok"] is True and found["job_status"] == "dead"
    # What venturi's operators see: the message, not the class alone; a failure counted.
    job = await venturi.get_job(conn, int(found["id"]))
    assert job is not None and job.failures == 1 and job.max_failures == 1
    assert job.last_error is not None
    assert job.last_error.splitlines()[0] == "tests.support.django_app.tasks.Refused: no stock"
    journal = await venturi.get_journal(conn, job.id)
    assert [(e.event, (e.detail or "").partition("\n")[0]) for e in journal[1:]] == [
        ("claimed", ""),
        ("retried", "tests.support.django_app.tasks.Refused: no stock"),
        ("dead", "failure backstop reached (1 of 1)"),
    ]
    listed = await manage(dsn, "venturi", "jobs", "list", "--status", "dead")
    assert "Refused: no stock" in listed.stdout, listed.stdout
    shown = await manage(dsn, "venturi", "jobs", "show", str(job.id))
    assert "1 of 1" in shown.stdout, shown.stdout
    stats = json.loads((await manage(dsn, "venturi", "stats", "--json")).stdout)
    [kind] = [k for k in stats["kinds"] if k["kind"] == "django.default"]
    assert kind["failures_recent"] == 1 and kind["dead"] == 1


async def test_one_raise_is_one_error_after_an_operator_retry_too(dsn: str) -> None:
    """Django keeps one TaskError per raise. An operator's retry of the dead job journals
    'retried' (manual retry) under the failed attempt's number: not a second error; the
    next failure is."""
    found = await scenario("tasks_failure", dsn)
    assert len(found["errors"]) == 1
    retried = await manage(dsn, "venturi", "jobs", "retry", found["id"])
    assert retried.returncode == 0, retried.stderr
    read = await scenario("tasks_result", dsn, VENTURI_TEST_ID=found["id"])
    assert read["status"] == "READY"
    [[path, trace]] = read["errors"]
    assert path == "tests.support.django_app.tasks.Refused" and "no stock" in trace
    again = await scenario("tasks_drain", dsn, VENTURI_TEST_ID=found["id"])
    assert again["status"] == "FAILED" and len(again["errors"]) == 2


async def test_systemexit_in_a_task_fails_it_and_the_worker_goes_on(
    dsn: str, conn: asyncpg.Connection
) -> None:
    """A task raising SystemExit fails under its own class, as any exception would; the
    worker runs the next job and stops cleanly when asked."""
    exits = await scenario("tasks_enqueue", dsn, VENTURI_TEST_TASK="exits", VENTURI_TEST_ARGS="[3]")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(MANAGE),
        "venturi",
        "worker",
        "--poll-max",
        "1",
        cwd=ROOT,
        env=_env(dsn),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def finished(job_id: int) -> bool:
            job = await venturi.get_job(conn, job_id)
            return job is not None and job.status in ("completed", "dead")

        await wait_for(lambda: finished(int(exits["id"])), within=60)
        # Enqueued after the SystemExit: only a worker still running takes it.
        after = await scenario(
            "tasks_enqueue", dsn, VENTURI_TEST_TASK="add", VENTURI_TEST_ARGS="[2, 2]"
        )
        await wait_for(lambda: finished(int(after["id"])), within=60)
        assert proc.returncode is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert await proc.wait() == 0, err.decode()
    read = await scenario("tasks_result", dsn, VENTURI_TEST_ID=exits["id"])
    assert read["status"] == "FAILED"
    [[path, trace]] = read["errors"]
    assert path == "builtins.SystemExit" and "SystemExit: 3" in trace
    job = await venturi.get_job(conn, int(after["id"]))
    assert job is not None and job.status == "completed" and job.result == 4


async def test_enqueued_at_is_the_same_from_enqueue_and_get_result(dsn: str) -> None:
    found = await scenario("tasks_enqueued_at", dsn)
    enqueued, read = found["inside"]
    assert enqueued == read == found["after_commit"]
    assert found["outside"][0] == found["outside"][1]


async def test_get_result_reads_the_job_and_its_journal_in_one_statement(dsn: str) -> None:
    """One statement is one snapshot: the job's status and its journal's errors agree."""
    found = await scenario("tasks_get_result_statements", dsn)
    assert found == {"statements": ["-- job_get_with_journal"], "errors": 1}


async def test_a_system_check_asks_for_the_app(dsn: str) -> None:
    """TASKS on VenturiBackend without venturi.contrib.django installed: no migrate would
    apply the schema; Django's checks say so before the first enqueue fails."""
    missing = await manage(dsn, "check", VENTURI_TEST_WITHOUT_APP="1")
    assert missing.returncode == 1
    assert "venturi.E001" in missing.stderr and "INSTALLED_APPS" in missing.stderr
    fine = await manage(dsn, "check")
    assert fine.returncode == 0, fine.stderr


async def test_max_attempts_lets_venturi_retry(dsn: str) -> None:
    found = await scenario(
        "tasks_retries",
        dsn,
        VENTURI_DJANGO_TASK_OPTIONS=json.dumps({"MAX_ATTEMPTS": 2}),
        VENTURI_TEST_MAKE_DUE=tsql.statement("job_make_due"),
    )
    assert found["statuses"] == [["READY", 1], ["FAILED", 2]]


async def test_priority_run_after_queues_and_context_map_onto_venturi(dsn: str) -> None:
    # The tiers of STRICT_PRIORITY False (the default puts every task in NORMAL).
    options = json.dumps({"STRICT_PRIORITY": False})
    found = await scenario("tasks_mapping", dsn, VENTURI_DJANGO_TASK_OPTIONS=options)
    assert found["deferred_visible_at_ok"] is True and found["deferred_status"] == "READY"
    assert found["kinds"] == {
        "deferred": "django.default",
        "report": "django.reports",
        "low": "django.default",
        "ctx": "django.default",
    }
    assert found["priorities"] == {
        "deferred": venturi.Priority.NORMAL,
        "report": venturi.Priority.HIGH,
        "low": venturi.Priority.LOW,
        "ctx": venturi.Priority.NORMAL,
    }
    assert found["report"] == ["SUCCESSFUL", [0, 1, 2]]  # an async task function
    assert found["ctx"] == {"tag": "t", "attempt": 1, "id": found["ctx_id"]}
    # Django 6 (Python >= 3.12) ships the framework: the backend and the project's tasks are
    # its own, not the backport's (also installed). Before it, the backport, whose
    # exception is InvalidTaskError up to 0.12 and InvalidTask after (as Django 6 names it).
    framework = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
    assert found["framework"] == framework
    assert found["task_class"] == f"{framework}.base.Task"
    assert found["backend_base"] == [f"{framework}.backends.base"]
    assert found["invalid"][0] in {
        f"{framework}.exceptions.InvalidTask",
        f"{framework}.exceptions.InvalidTaskError",
    }
    assert found["invalid"] == found["invalid"][:1] * 2
    assert found["missing"] == ["999999", "not-a-number"]
    assert found["flags"] == [True, True, True, True]


async def test_priority_orders_within_a_tier(dsn: str) -> None:
    """STRICT_PRIORITY False: Django's numeric order (larger sooner) holds within each
    tier, then enqueue order; the tiers themselves strictly ordered here (no
    anti-starvation)."""
    options = json.dumps({"STRICT_PRIORITY": False})
    found = await scenario(
        "tasks_order", dsn, VENTURI_TEST_RATIO="strict", VENTURI_DJANGO_TASK_OPTIONS=options
    )
    high, normal, low = venturi.Priority.HIGH, venturi.Priority.NORMAL, venturi.Priority.LOW
    assert found["tiers"] == [high, high, high, normal, low, low, high]
    assert found["ran"] == "bgacdef"


@pytest.mark.parametrize("options", [{}, {"STRICT_PRIORITY": True}])
async def test_strict_priority_is_django_s_order_whatever_the_ratio(
    dsn: str, options: dict[str, Any]
) -> None:
    """STRICT_PRIORITY (the default, or said): every task in one tier, so the worker's
    anti-starvation (every 4th claim for the lower tiers) has nothing to reorder."""
    found = await scenario(
        "tasks_order", dsn, VENTURI_TEST_RATIO="4", VENTURI_DJANGO_TASK_OPTIONS=json.dumps(options)
    )
    assert found["tiers"] == [venturi.Priority.NORMAL] * 7
    assert found["ran"] == "bgacdef"


async def test_run_after_and_priority_in_django_s_order_by_default(dsn: str) -> None:
    """django-tasks' test_run_after_priority, run by the worker with its default ratio:
    the due tasks by priority, larger first (the tiers' anti-starvation ran the -2 one
    before the 2 one: 1 2 6 8 7). Equal priorities run in enqueue order, not in run_after
    order as django-tasks' database backend does (2 1 6 7 8): docs/django.md says why."""
    found = await scenario("tasks_run_after_order", dsn)
    assert found["ran"] == ["1", "2", "6", "7", "8"]


async def test_a_django_task_s_group_is_given_by_a_block(dsn: str) -> None:
    """``with group(name):`` puts the tasks enqueued in it (aenqueue too) in the group; a
    grouped task's own enqueues take its group unless ``group(None)``; a bad name is a
    ConfigError before any write; the worker claims grouped and plain jobs alike."""
    found = await scenario("tasks_groups", dsn)
    assert found["groups"] == {
        "acme": ["acme", "completed"],
        "follow": ["acme", "completed"],
        "beta": ["beta", "completed"],
        "plain": [None, "completed"],
        "inherited": ["acme", "completed"],
        "alone": [None, "completed"],
    }
    assert found["bad"] is not None and "group must be a non-empty string" in found["bad"]
    # A queue's group is operated as any kind's (docs/groups.md): django.<queue_name>.
    done = await manage(dsn, "venturi", "groups", "set", "django.default", "acme", "--cap", "2")
    assert done.returncode == 0, done.stderr
    shown = await manage(dsn, "venturi", "groups", "show", "django.default", "acme", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cap"] == 2


async def test_aenqueue_and_aget_result(dsn: str) -> None:
    found = await scenario("tasks_aenqueue", dsn)
    assert found == {"ready": "READY", "status": "SUCCESSFUL", "value": 9}


async def test_a_django_task_uses_workflow_primitives_through_job_context(dsn: str) -> None:
    """docs/django.md's worked example, sync and async: the step runs once over two runs,
    the task waits for its signal (RUNNING, the job waiting) and completes with it."""
    found = await scenario("tasks_workflow", dsn)
    assert found["outside"].startswith("job_context() is only known inside a Django task")
    for name, order in (("sync", 7), ("async", 8)):
        assert found[name] == {
            "job_status": "waiting",
            "waiting_status": "RUNNING",
            "sent": True,
            "status": "SUCCESSFUL",
            "value": f"charge-{order} approved by maria",
            "errors": 0,
        }, name
    assert found["charged"] == [7, 8]  # each charged once, replayed on the second run
