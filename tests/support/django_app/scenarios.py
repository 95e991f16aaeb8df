"""What a test runs inside Django: ``python -m tests.support.django_app.scenarios NAME``
with ``VENTURI_DJANGO_DSN`` set prints one JSON object, the scenario's findings, as its
last line. ``VENTURI_DJANGO_DRIVER=psycopg2`` hides psycopg 3, so Django's postgresql
backend runs on psycopg2."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

if os.environ.get("VENTURI_DJANGO_DRIVER") == "psycopg2":
    sys.modules["psycopg"] = None  # type: ignore[assignment]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.django_app.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

import venturi  # noqa: E402
from tests.support import sql as tsql  # noqa: E402
from tests.support.carries import Item  # noqa: E402
from tests.support.django_app import jobs, tasks  # noqa: E402
from venturi import testing  # noqa: E402
from venturi.contrib.django import backend, config, tasks_api  # noqa: E402

SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {}


def scenario(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    SCENARIOS[fn.__name__] = fn
    return fn


class _Rollback(Exception):
    pass


def _drain(*queues: str, timers: bool = True) -> None:
    """Run every due job of the Django queues (and the venturi task) in this process;
    ``timers=False`` leaves workflow timers (a signal's timeout) as they are."""
    todo: list[Any] = [backend.runner(q) for q in queues] or [jobs.note]
    asyncio.run(testing.drain(config.dsn(), todo, timers=timers))


@scenario
def driver() -> dict[str, Any]:
    return {"driver": connection.Database.__name__, "dsn": config.dsn()}


@scenario
def rollback() -> dict[str, Any]:
    try:
        with transaction.atomic():
            job_id = jobs.note.enqueue_sync(connection, Item(1))
            seen = venturi.get_job_sync(connection, job_id) is not None
            raise _Rollback
    except _Rollback:
        pass
    return {"id": job_id, "seen_inside": seen, "after": venturi.get_job_sync(connection, job_id)}


@scenario
def commit() -> dict[str, Any]:
    with transaction.atomic():
        inside = jobs.note.enqueue_sync(connection, Item(1))
        [many] = venturi.enqueue_many_sync(connection, [jobs.note.job(Item(2), key="k")])
    # Outside atomic(): Django's autocommit; the call commits on its own.
    alone = jobs.note.enqueue_sync(connection, Item(3))
    return {"ids": [inside, many, alone], "in_atomic": connection.in_atomic_block}


@scenario
def wrong_carry() -> dict[str, Any]:
    got = []
    with transaction.atomic():
        for call in (
            lambda: jobs.note.enqueue_sync(connection, "not an Item"),  # type: ignore[arg-type]
            lambda: venturi.enqueue_many_sync(connection, [jobs.note.job(Item(1)), object()]),  # type: ignore[list-item]
        ):
            try:
                call()
            except TypeError as exc:
                got.append(type(exc).__name__)
        # The block's transaction is intact: nothing was sent, so it goes on.
        after = jobs.note.enqueue_sync(connection, Item(2))
    return {"errors": got, "after": after}


@scenario
def key() -> dict[str, Any]:
    job_id = int(os.environ["VENTURI_TEST_HELD"])
    with transaction.atomic():
        same = jobs.note.enqueue_sync(connection, Item(9), key="held")
    mine = jobs.note.enqueue_sync(connection, Item(9), key="mine")
    return {"held": job_id, "same": same, "mine": mine}


@scenario
def enqueue_one() -> dict[str, Any]:
    return {"id": jobs.note.enqueue_sync(connection, Item(1))}


@scenario
def journal() -> dict[str, Any]:
    job_id = jobs.note.enqueue_sync(connection, Item(1))
    _drain()
    job = venturi.get_job_sync(connection, job_id)
    events = [e.event for e in venturi.get_journal_sync(connection, job_id)]
    return {
        "status": job.status if job else None,
        "result": job.result if job else None,
        "events": events,
    }


# --- the Tasks framework -------------------------------------------------------------


@scenario
def tasks_roundtrip() -> dict[str, Any]:
    signals: list[tuple[str, str]] = []
    for name in ("task_enqueued", "task_started", "task_finished"):
        getattr(backend, name).connect(
            lambda sender, task_result, name=name, **kw: signals.append(
                (name, str(task_result.status))
            ),
            weak=False,
        )
    result = tasks.add.enqueue(2, 3)
    ready = tasks.add.get_result(result.id)
    job = venturi.get_job_sync(connection, int(result.id))
    _drain("default")
    result.refresh()
    return {
        "id": result.id,
        "enqueued_status": str(ready.status),
        "kind": job.kind if job else None,
        "priority": int(job.priority) if job else None,
        "status": str(result.status),
        "return_value": result.return_value,
        "finished": result.is_finished,
        "attempts": result.attempts,
        "worker_ids": len(result.worker_ids),
        "started": result.started_at is not None and result.finished_at is not None,
        "args": result.args,
        "signals": signals,
    }


@scenario
def tasks_enqueued_at() -> dict[str, Any]:
    """enqueue()'s result and get_result()'s agree on enqueued_at, inside an atomic block
    whose transaction started before the enqueue (the row's clock is its start)."""
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute(tsql.statement("clock_now"))  # the transaction starts here
        inside = tasks.add.enqueue(1, 1)
        read_inside = tasks.add.get_result(inside.id)
    outside = tasks.add.enqueue(2, 2)
    return {
        "inside": [str(inside.enqueued_at), str(read_inside.enqueued_at)],
        "after_commit": str(tasks.add.get_result(inside.id).enqueued_at),
        "outside": [str(outside.enqueued_at), str(tasks.add.get_result(outside.id).enqueued_at)],
    }


@scenario
def tasks_get_result_statements() -> dict[str, Any]:
    """The statements get_result() runs: the job and its journal in one (one snapshot)."""
    from django.test.utils import CaptureQueriesContext

    result = tasks.fails.enqueue("once")
    _drain("default")
    with CaptureQueriesContext(connection) as ran:
        read = tasks.fails.get_result(result.id)
    # Statements, not the transaction's BEGIN and COMMIT around them.
    statements = [q["sql"] for q in ran.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    return {"statements": [s.partition(":")[0] for s in statements], "errors": len(read.errors)}


@scenario
def tasks_order() -> dict[str, Any]:
    """Tasks of several priorities, enqueued in a mixed order, then run one at a time by
    a worker whose anti-starvation ratio is VENTURI_TEST_RATIO ("strict": none)."""
    ids = [
        tasks.noted.using(priority=priority).enqueue(tag).id
        for tag, priority in (("a", 5), ("b", 50), ("c", 1), ("d", 0), ("e", -5), ("f", -60))
    ]
    ids.append(tasks.noted.using(priority=50).enqueue("g").id)
    tiers = [int(venturi.get_job_sync(connection, int(i)).priority) for i in ids]  # type: ignore[union-attr]
    ratio = os.environ.get("VENTURI_TEST_RATIO", "4")
    asyncio.run(
        testing.drain(
            config.dsn(),
            [backend.runner("default")],
            priority_ratio=None if ratio == "strict" else int(ratio),
        )
    )
    return {"ran": "".join(tasks.RAN), "tiers": tiers}


@scenario
def tasks_run_after_order() -> dict[str, Any]:
    """django-tasks' test_run_after_priority: due and future tasks of several priorities
    (tags "1".."8" in enqueue order), drained by a worker with the default
    anti-starvation ratio (4): which ran, in order."""
    now = timezone.now()
    for tag, priority, run_after in (
        ("1", 20, now - timedelta(hours=2)),
        ("2", 20, now - timedelta(hours=10)),
        ("3", 0, now + timedelta(hours=10)),
        ("4", 10, now + timedelta(hours=10)),
        ("5", 0, now + timedelta(hours=2)),
        ("6", 10, None),
        ("7", 2, None),
        ("8", -2, None),
    ):
        tasks.noted.using(priority=priority, run_after=run_after).enqueue(tag)
    asyncio.run(testing.drain(config.dsn(), [backend.runner("default")], priority_ratio=4))
    return {"ran": tasks.RAN}


@scenario
def tasks_groups() -> dict[str, Any]:
    """docs/django.md's groups: enqueue and aenqueue in a group's block, outside one, a
    bad name, and a grouped task that enqueues more; drained; each job's group."""
    from venturi.contrib.django import group

    async def in_beta() -> str:
        with group("beta"):
            return (await tasks.add.aenqueue(2, 2)).id

    with group("acme"):
        acme = tasks.add.enqueue(1, 1).id
        follow = tasks.follow_up.enqueue("f").id
    beta = asyncio.run(in_beta())
    plain = tasks.add.enqueue(3, 3).id
    with group("legacy"):
        legacy = tasks.follow_up.enqueue("l").id
    # Test-side write: a group an older release took with a line separator; the task's
    # own enqueues, into its group, failed as a new job's group, and the task died.
    with connection.cursor() as c:
        c.execute("UPDATE venturi.jobs SET grp = %s WHERE id = %s", ["old\u2028name", int(legacy)])
        c.execute("UPDATE venturi.group_wakes SET grp = %s WHERE grp = 'legacy'", ["old\u2028name"])
    try:
        with group("bad\nname"):
            tasks.add.enqueue(4, 4)
        bad = None
    except venturi.ConfigError as exc:
        bad = str(exc)
    _drain("default")
    inherited, alone = tasks.follow_up.get_result(follow).return_value.split()
    legacy_child = tasks.follow_up.get_result(legacy).return_value.split()[0]

    def grp(i: str) -> Any:
        job = venturi.get_job_sync(connection, int(i))
        return None if job is None else [job.group, job.status]

    return {
        "groups": {
            k: grp(v)
            for k, v in (
                ("acme", acme),
                ("follow", follow),
                ("beta", beta),
                ("plain", plain),
                ("inherited", inherited),
                ("alone", alone),
                ("legacy", legacy),
                ("legacy child", legacy_child),
            )
        },
        "bad": bad,
        "jobs": venturi.get_job_sync(connection, int(plain)) is not None,
    }


@scenario
def tasks_enqueue() -> dict[str, Any]:
    """Enqueue ``tasks.<VENTURI_TEST_TASK>`` with the JSON args of VENTURI_TEST_ARGS."""
    task = getattr(tasks, os.environ["VENTURI_TEST_TASK"])
    return {"id": task.enqueue(*json.loads(os.environ.get("VENTURI_TEST_ARGS", "[]"))).id}


@scenario
def tasks_result() -> dict[str, Any]:
    """The TaskResult of VENTURI_TEST_ID, as get_result() reads it."""
    result = tasks_api.task_backends["default"].get_result(os.environ["VENTURI_TEST_ID"])
    return {
        "status": str(result.status),
        "errors": [[e.exception_class_path, e.traceback] for e in result.errors],
    }


@scenario
def tasks_drain() -> dict[str, Any]:
    """Run the due jobs of the default queue, then the TaskResult of VENTURI_TEST_ID."""
    _drain("default")
    return tasks_result()


@scenario
def tasks_enqueue_add() -> dict[str, Any]:
    return {"id": tasks.add.enqueue(2, 3).id}


@scenario
def tasks_atomic() -> dict[str, Any]:
    try:
        with transaction.atomic():
            rolled = tasks.add.enqueue(1, 1)
            raise _Rollback
    except _Rollback:
        pass
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 2)
    gone = False
    try:
        tasks.add.get_result(rolled.id)
    except tasks_api.TaskResultDoesNotExist:
        gone = True
    return {"rolled_back_gone": gone, "kept": str(tasks.add.get_result(kept.id).status)}


@scenario
def tasks_failure() -> dict[str, Any]:
    result = tasks.fails.enqueue("no stock")
    _drain("default")
    result.refresh()
    try:
        result.return_value  # noqa: B018
        raised = None
    except ValueError as exc:
        raised = str(exc)
    return {
        "id": result.id,
        "status": str(result.status),
        "raised": raised,
        "errors": [(e.exception_class_path, "no stock" in e.traceback) for e in result.errors],
        "class_ok": result.errors[0].exception_class is tasks.Refused if result.errors else False,
        "job_status": venturi.get_job_sync(connection, int(result.id)).status,  # type: ignore[union-attr]
    }


@scenario
def tasks_retries() -> dict[str, Any]:
    """OPTIONS MAX_ATTEMPTS=2: READY again after the first failure, FAILED after two."""
    result = tasks.fails.enqueue("twice")
    statuses = []
    for _ in range(2):
        # Each failure backs off: make the job due again rather than wait.
        _drain("default")
        result.refresh()
        statuses.append((str(result.status), len(result.errors)))
        with connection.cursor() as cur:
            cur.execute(os.environ["VENTURI_TEST_MAKE_DUE"], [int(result.id)])
    return {"statuses": statuses}


@scenario
def tasks_mapping() -> dict[str, Any]:
    later = timezone.now() + timedelta(hours=1)
    deferred = tasks.add.using(run_after=later).enqueue(1, 2)
    report = tasks.report.enqueue(3)
    low = tasks.low.enqueue()
    ctx = tasks.with_context.enqueue("t")
    rows = {
        name: venturi.get_job_sync(connection, int(r.id))
        for name, r in (("deferred", deferred), ("report", report), ("low", low), ("ctx", ctx))
    }
    invalid = []
    for bad in (
        lambda: tasks.add.using(queue_name="nope").enqueue(1, 1),
        lambda: tasks.add.using(priority=101).enqueue(1, 1),
    ):
        try:
            bad()
        except tasks_api.InvalidTask as exc:
            invalid.append(f"{type(exc).__module__}.{type(exc).__name__}")
    _drain("default", "reports")
    for r in (deferred, report, ctx):
        r.refresh()
    missing = []
    for rid in ("999999", "not-a-number"):
        try:
            tasks.add.get_result(rid)
        except tasks_api.TaskResultDoesNotExist:
            missing.append(rid)
    return {
        "deferred_visible_at_ok": abs((rows["deferred"].visible_at - later).total_seconds()) < 1,  # type: ignore[union-attr]
        "deferred_status": str(deferred.status),
        "kinds": {k: v.kind for k, v in rows.items() if v},
        "priorities": {k: int(v.priority) for k, v in rows.items() if v},
        "report": [str(report.status), report.return_value],
        "ctx": ctx.return_value,
        "ctx_id": ctx.id,
        "invalid": invalid,
        "missing": missing,
        "framework": tasks_api.FRAMEWORK,
        "task_class": f"{type(tasks.add).__module__}.{type(tasks.add).__name__}",
        "backend_base": [c.__module__ for c in backend.VenturiBackend.__mro__[1:2]],
        "flags": [
            backend.VenturiBackend.supports_defer,
            backend.VenturiBackend.supports_async_task,
            backend.VenturiBackend.supports_get_result,
            backend.VenturiBackend.supports_priority,
        ],
    }


@scenario
def tasks_aenqueue() -> dict[str, Any]:
    async def go() -> Any:
        result = await tasks.add.aenqueue(4, 5)
        again = await tasks.add.aget_result(result.id)
        return result, again

    result, again = asyncio.run(go())
    _drain("default")

    async def refresh() -> None:
        await result.arefresh()

    asyncio.run(refresh())
    return {"ready": str(again.status), "status": str(result.status), "value": result.return_value}


@scenario
def tasks_workflow() -> dict[str, Any]:
    """docs/django.md's worked example: a Django task's steps, sleep and signal wait
    through job_context(), sync and async; the signal sent on Django's connection."""
    found: dict[str, Any] = {}
    try:
        backend.job_context()
    except venturi.VenturiError as exc:
        found["outside"] = str(exc)
    for name, task, args in (
        ("sync", tasks.approve_order, (7, 0)),
        ("async", tasks.approve_async, (8,)),
    ):
        result = task.enqueue(*args)
        _drain("default", timers=False)  # runs until it waits for the signal
        job = venturi.get_job_sync(connection, int(result.id))
        waiting = str(task.get_result(result.id).status)
        sent = venturi.signal_sync(connection, int(result.id), "approval", {"by": "maria"})
        _drain("default", timers=False)
        result.refresh()
        found[name] = {
            "job_status": job.status if job else None,
            "waiting_status": waiting,
            "sent": sent,
            "status": str(result.status),
            "value": result.return_value,
            "errors": len(result.errors),
        }
    found["charged"] = tasks.CHARGED
    return found


@scenario
def tasks_non_finite() -> dict[str, Any]:
    """NaN and infinity in a task's arguments (refused at enqueue) and return value (its
    attempt fails): JSON stores them as null, and the task would run on None."""
    refused = []
    for args, kwargs in (((float("nan"), 1.0), {}), ((1.0,), {"b": float("-inf")})):
        try:
            tasks.ratio.enqueue(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            refused.append(f"{type(exc).__name__}: {exc}")
    result = tasks.ratio.enqueue(1.0, 0.0)
    _drain("default")
    result.refresh()
    return {
        "refused": refused,
        "status": str(result.status),
        "error": result.errors[0].traceback.strip().splitlines()[-1] if result.errors else None,
        "jobs": venturi.get_job_sync(connection, int(result.id)) is not None,
    }


@scenario
def tasks_args_size() -> dict[str, Any]:
    """Arguments of 3,000 and of 5,000 characters, under OPTIONS (MAX_ARGS_BYTES or
    not); then the backend built with each bad MAX_ARGS_BYTES."""
    found: dict[str, Any] = {}
    for n in (3_000, 5_000, 2 << 20):
        try:
            found[str(n)] = tasks.noted.enqueue("x" * n).status
        except (TypeError, ValueError) as exc:
            found[str(n)] = f"{type(exc).__name__}: {exc}"
    refused = []
    for bad in (0, -1, 1.5, True, "4096", 1 << 40):
        try:
            backend.VenturiBackend("other", {"OPTIONS": {"MAX_ARGS_BYTES": bad}})
        except Exception as exc:
            refused.append(str(exc))
    found["refused"] = refused
    return found


if __name__ == "__main__":
    found = SCENARIOS[sys.argv[1]]()
    print(json.dumps(found, default=str))
