"""``VenturiBackend`` (``venturi.contrib.django``) under Django's Tasks framework, as its
documentation describes a backend, against a real database.

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
from typing import Any

import asyncpg
import django
import pytest

import venturi
from tests.support import expire_claim, make_due
from tests.support import sql as tsql
from tests.support.claims import claim
from tests.support.cli import ROOT
from tests.support.django_app.run import DRIVERS, MANAGE, environment, manage, scenario
from tests.support.waits import wait_for
from venturi import db

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
        env=environment(dsn),
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
        "legacy": ["old\u2028name", "completed"],
        "legacy child": ["old\u2028name", "completed"],
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


async def _lose_the_lease(conn: asyncpg.Connection, job_id: int) -> str:
    """A worker claims the job and is killed: its lease expires and recovery counts the
    attempt as failed, as it would after ``kill -9``. The recovery's error."""
    [row] = await claim(conn, db.Claimant("ghost:9"), ["django.default"], lease=0.001)
    assert row["id"] == job_id
    await expire_claim(conn, job_id)
    [recovered] = await db.claims.job_recover_stale(
        conn, schema="venturi", recoverer="sweeper:1", backoff=venturi.Backoff.fixed(0)
    )
    assert recovered["id"] == job_id
    job = await venturi.get_job(conn, job_id)
    assert job is not None and job.last_error is not None
    return job.last_error


@pytest.mark.parametrize("attempts", [1, 3])
async def test_an_attempt_lost_to_a_killed_worker_is_an_error(
    dsn: str, conn: asyncpg.Connection, attempts: int
) -> None:
    """docs/django.md: one TaskError per failed attempt, a lease that expires included. At
    the backstop (1 of 1) the error is the lost lease, not the backstop's line; an attempt
    lost before a success is still one."""
    options = {"VENTURI_DJANGO_TASK_OPTIONS": json.dumps({"MAX_ATTEMPTS": attempts})}
    found = await scenario(
        "tasks_enqueue", dsn, VENTURI_TEST_TASK="add", VENTURI_TEST_ARGS="[2, 3]", **options
    )
    lost = await _lose_the_lease(conn, int(found["id"]))
    assert "presumed dead" in lost
    if attempts == 1:
        read = await scenario("tasks_result", dsn, VENTURI_TEST_ID=found["id"], **options)
        assert read["status"] == "FAILED"
    else:
        await make_due(conn, int(found["id"]))
        read = await scenario("tasks_drain", dsn, VENTURI_TEST_ID=found["id"], **options)
        assert read["status"] == "SUCCESSFUL"
    assert read["errors"] == [["venturi.errors.VenturiError", lost]]


async def test_nan_or_infinity_in_arguments_or_return_value_is_refused_in_one_line(
    dsn: str, conn: asyncpg.Connection
) -> None:
    found = await scenario("tasks_non_finite", dsn)
    path = "tests.support.django_app.tasks.ratio"
    assert (
        found["refused"]
        == [
            f"TypeError: the arguments of task {path} hold NaN or infinity, which JSON cannot store"
        ]
        * 2
    )
    assert found["status"] == "FAILED"
    assert found["error"] == (
        f"TypeError: the return value of task {path} holds NaN or infinity, which JSON cannot store"
    )
    assert await conn.fetchval("SELECT count(*) FROM venturi.all_jobs") == 1


async def test_max_args_bytes_bounds_a_task_s_arguments_in_django_s_words(dsn: str) -> None:
    path = "tests.support.django_app.tasks.noted"
    found = await scenario(
        "tasks_args_size", dsn, VENTURI_DJANGO_TASK_OPTIONS=json.dumps({"MAX_ARGS_BYTES": 4096})
    )
    assert found["3000"] == "READY"
    assert found["5000"].startswith(f"ValueError: the arguments of task {path} are 5")
    assert found["5000"].endswith(
        " bytes encoded, over the limit of 4096 (TASKS['default']['OPTIONS']['MAX_ARGS_BYTES'])"
    )
    knob = "TASKS['other']['OPTIONS']['MAX_ARGS_BYTES'] must be an integer from 1 to 268435456"
    assert found["refused"] == [
        f"{knob}, got {bad}" for bad in ("0", "-1", "1.5", "True", "'4096'", str(1 << 40))
    ]
    # By default, 1 MiB as any venturi carry: 2 MiB is refused, naming the option.
    default = await scenario("tasks_args_size", dsn)
    assert default["5000"] == "READY"
    assert (
        "over the limit of 1048576 (TASKS['default']['OPTIONS']['MAX_ARGS_BYTES'])"
        in (default[str(2 << 20)])
    )
