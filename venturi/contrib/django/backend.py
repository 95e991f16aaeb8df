"""``VenturiBackend``: Django's Tasks framework on venturi.

A Django task's ``.enqueue()`` writes a venturi job on Django's own connection (inside
an open ``transaction.atomic()`` block the job commits or rolls back with it), and
``manage.py venturi worker`` runs it. How the framework's concepts map onto venturi's:

- the ``TaskResult`` id is the venturi job id, as a string;
- a queue is a venturi kind, ``django.<queue_name>``: operators cap, rate-limit, pause
  and list a queue as a kind;
- ``priority`` (-100..100, larger runs sooner) is Django's order by default: every task
  of the backend is in venturi's NORMAL tier with the rank -priority, so the larger
  priority runs first, then the earlier enqueued, whatever the worker's anti-starvation
  ratio. ``OPTIONS = {"STRICT_PRIORITY": False}`` folds priorities into venturi's three
  tiers instead (above 0 HIGH, 0 NORMAL, below 0 LOW, the rank ordering each tier), where
  the worker's anti-starvation (``--priority-ratio``, default 4) reserves every 4th claim
  for NORMAL and LOW and every 16th for LOW: a waiting priority 50 task may then see a
  priority -50 one run first;
- ``run_after`` is the job's ``at`` (``supports_defer``);
- ``takes_context``: the task gets a ``TaskContext`` whose ``attempt`` is the venturi
  attempt;
- status: pending READY, claimed RUNNING, completed SUCCESSFUL (the return value is the
  job's stored result), dead or cancelled FAILED;
- errors: one ``TaskError`` (exception class path, traceback) per failed attempt, from
  the job's journal (venturi's lists show its first line, ``path: message``; an
  operator's retry of the dead job is no error); an attempt
  that raises anything but ``KeyboardInterrupt`` (``SystemExit`` included) is a failed
  attempt, and the worker goes on;
- a group (docs/groups.md): the tasks enqueued inside ``with group("acme"):`` (from
  ``venturi.contrib.django``) are jobs of that group; a task the worker runs enqueues
  into its own job's group unless told otherwise;
- ``enqueued_at`` is the row's ``created_at`` (the enqueuing transaction's start), the
  same from ``enqueue()`` and ``get_result()``;
- workflows: inside a task, ``job_context()`` is the venturi ``Context`` of the run, whose
  primitives (``step``, ``sleep``, ``wait_for_signal``, ``spawn``, ``gather`` ...) are
  blocking calls in a sync task and awaited in an async one; a wait leaves the result
  RUNNING (the job ``waiting``) until the worker runs the task again, from the top.

Django's framework has no retries, so by default a task that raises is FAILED at once
(its failure counted, the job settles dead at its failure backstop of 1).
``OPTIONS = {"MAX_ATTEMPTS": n}`` lets venturi run it up to n times with its backoff in
between (READY again after each failure, errors kept). Other options: ``DATABASE`` (a
``DATABASES`` alias) and ``SCHEMA``, by default the ``VENTURI`` setting's, and
``STRICT_PRIORITY`` (above, default True).
"""

from __future__ import annotations

import contextvars
import os
import socket
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import msgspec
from django.apps import apps
from django.core import checks
from django.db import close_old_connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

import venturi
from venturi import db
from venturi.codecs import encode_any
from venturi.contrib.django import config, grouping
from venturi.contrib.django.tasks_api import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    get_exception_traceback,
    get_module_path,
    normalize_json,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from venturi.jobs import JobInfo, JournalEntry, get_job_and_journal_sync
from venturi.status import MANUAL_RETRY, JobStatus, JournalEvent
from venturi.tasks import DEFAULT_MAX_CARRY_BYTES, registered
from venturi.workflow.suspend import Suspend, Unreplayable

KIND_PREFIX = "django."
APP = "venturi.contrib.django"
OPTIONS = ("DATABASE", "SCHEMA", "MAX_ATTEMPTS", "STRICT_PRIORITY", "MAX_ARGS_BYTES")
# The most MAX_ARGS_BYTES may be: jsonb's own limit is about 255 MiB. The runner tasks
# take carries up to it, and each backend bounds its tasks' arguments by its option
# (a queue's runner is one task, shared by the backends that name the queue).
MAX_ARGS_CEILING = 256 << 20

# Who ran an attempt, as venturi's worker names itself (its default identity).
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"

_STATUS: dict[str, TaskResultStatus] = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.CLAIMED: TaskResultStatus.RUNNING,
    # A venturi workflow between its runs: started, not finished.
    JobStatus.WAITING: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}
# The journal events that record a failed attempt (detail: what it raised, or the lease
# that expired under a killed worker: stale recovery's entry).
_FAILURES = (
    JournalEvent.FAILED,
    JournalEvent.RETRIED,
    JournalEvent.TIMED_OUT,
    JournalEvent.STALE_RECOVERED,
)


class DjangoCall(msgspec.Struct, frozen=True):
    """The carry of a Django task's job: which task, with what, as it was enqueued."""

    task: str  # the task function's module path
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str  # the TASKS alias
    queue_name: str
    priority: int
    run_after: datetime | None = None
    max_attempts: int = 1


def kind_of(queue_name: str) -> str:
    """The venturi kind of a Django queue."""
    return f"{KIND_PREFIX}{queue_name}"


def tier_of(priority: int) -> venturi.Priority:
    """venturi's tier for a Django priority (-100..100, larger sooner)."""
    if priority > 0:
        return venturi.Priority.HIGH
    return venturi.Priority.NORMAL if priority == 0 else venturi.Priority.LOW


# The venturi Context of the Django task running in this thread (job_context()).
_RUNNING: contextvars.ContextVar[venturi.Context[Any] | None] = contextvars.ContextVar(
    "venturi_django_context", default=None
)


def job_context() -> venturi.Context[Any]:
    """The venturi ``Context`` of the Django task this code runs in, run by
    ``VenturiBackend``'s worker: its workflow primitives (``ctx.step``, ``ctx.sleep``,
    ``ctx.wait_for_signal``, ``ctx.spawn``, ``ctx.gather`` ...) are blocking calls in a
    sync task and awaited in an async one. A one-line ``VenturiError`` anywhere else."""
    ctx = _RUNNING.get()
    if ctx is None:
        raise venturi.VenturiError(
            "job_context() is only known inside a Django task that VenturiBackend's worker "
            "runs (manage.py venturi worker)"
        )
    return ctx


def run_django_task(ctx: venturi.Context[Any], carry: DjangoCall) -> venturi.Outcome:
    """The venturi handler of every Django task (a plain def: the worker runs it in a
    thread, where Django's ORM works as in a request)."""
    close_old_connections()
    token = _RUNNING.set(ctx)
    try:
        with grouping.running_in(ctx.job.group):
            return _run(ctx, carry)
    finally:
        _RUNNING.reset(token)
        close_old_connections()


def _run(ctx: venturi.Context[Any], carry: DjangoCall) -> venturi.Outcome:
    final = ctx.job.failures + 1 >= carry.max_attempts
    try:
        task = _task_of(carry)
    except Exception as exc:
        # A task that cannot be imported here will not be importable on a retry either.
        return venturi.dead(_error_text(exc))
    backend = task.get_backend()
    now = timezone.now()
    result = TaskResult(
        task=task,
        id=str(ctx.job.id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=ctx.job.created_at,
        started_at=now,
        finished_at=None,
        last_attempted_at=now,
        args=carry.args,
        kwargs=carry.kwargs,
        backend=carry.backend,
        errors=[],
        worker_ids=[WORKER_ID] * max(ctx.job.attempt, 1),
    )
    task_started.send(sender=type(backend), task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *carry.args, **carry.kwargs)
        else:
            value = task.call(*carry.args, **carry.kwargs)
        value = normalize_json(value)
        # Refused here, as the task's own failure in Django's words (a NaN, which JSON
        # stores as null), not later by the worker as venturi's result.
        encode_any(value, f"the return value of task {carry.task}")
    except (Suspend, Unreplayable):
        # A workflow primitive's wait (or a recorded value that no longer decodes): not
        # a failed attempt; the worker settles it (waiting, or dead with its reason).
        raise
    except BaseException as exc:
        # As Django's own backends: whatever the task raises (SystemExit too) fails this
        # attempt under its own class, and the worker goes on; only a KeyboardInterrupt,
        # the user stopping the process, is let through, once the attempt is reported.
        text = _error_text(exc)
        object.__setattr__(result, "finished_at", timezone.now())
        result.errors.append(_task_error(text))
        if final:
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
        task_finished.send(sender=type(backend), task_result=result)
        if isinstance(exc, KeyboardInterrupt):
            raise
        # A failed attempt, counted as one (the job's failures, the operators' stats):
        # retried while attempts remain, dead at the backstop (max_failures is
        # MAX_ATTEMPTS) after the last.
        return venturi.retry(reason=text)
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "_return_value", value)
    task_finished.send(sender=type(backend), task_result=result)
    return venturi.complete(value)


def _arguments_refused(exc: TypeError | ValueError, kind: str, path: str) -> Exception:
    """The codec's refusal of a Django task's carry, in Django's words: the carry is
    venturi's envelope of the task's arguments, which a Django user never sees."""
    carry, args = f"carry of task {kind!r}", f"the arguments of task {path}"
    text = str(exc)
    for was, now in ((f"{carry} holds ", f"{args} hold "), (f"{carry} is ", f"{args} are ")):
        text = text.replace(was, now, 1)
    text = text.replace(carry, args, 1).replace("(max_carry_bytes)", "(MAX_ARGS_BYTES at most)")
    return type(exc)(text)


def _error_text(exc: BaseException) -> str:
    """What a failed attempt's journal entry holds: ``class.path: message`` on the first
    line (the line venturi's lists and the dashboard show), then the traceback."""
    path = get_module_path(type(exc))
    message = str(exc).strip().partition("\n")[0]
    head = f"{path}: {message}" if message else path
    return f"{head}\n{get_exception_traceback(exc)}"


def _task_error(text: str) -> Any:
    head, _, trace = text.partition("\n")
    path = head.partition(": ")[0]
    if not path or " " in path or "." not in path:
        # Not an error this backend wrote (a lease that expired, a timeout): venturi's.
        return TaskError(exception_class_path="venturi.errors.VenturiError", traceback=text)
    return TaskError(exception_class_path=path, traceback=trace)


def _task_of(carry: DjangoCall) -> Any:
    task = import_string(carry.task)
    if not isinstance(task, Task):
        raise TypeError(f"{carry.task} is not a Django task")
    return task.using(
        priority=carry.priority,
        queue_name=carry.queue_name,
        run_after=carry.run_after,
        backend=carry.backend,
    )


def runner(queue_name: str) -> venturi.Task[DjangoCall]:
    """The venturi task that runs the Django tasks of one queue."""
    kind = kind_of(queue_name)
    existing = registered().get(kind)
    if existing is not None:
        return existing
    return venturi.task(kind, max_carry_bytes=MAX_ARGS_CEILING)(run_django_task)


class VenturiBackend(BaseTaskBackend):  # type: ignore[misc]
    """Django's Tasks framework on venturi; see the module's docstring for the mapping."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = sorted(set(self.options) - set(OPTIONS))
        if unknown:
            raise InvalidTask(
                f"TASKS[{alias!r}]['OPTIONS']: unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(OPTIONS)}"
            )
        attempts = self.options.get("MAX_ATTEMPTS", 1)
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise InvalidTask(
                f"TASKS[{alias!r}]['OPTIONS']['MAX_ATTEMPTS'] must be an integer >= 1, "
                f"got {attempts!r}"
            )
        self.max_attempts = attempts
        # Django's order by default (docs/django.md, Priority): its contract is "larger
        # priority sooner", which venturi's tiers bend under anti-starvation.
        strict = self.options.get("STRICT_PRIORITY", True)
        if not isinstance(strict, bool):
            raise InvalidTask(
                f"TASKS[{alias!r}]['OPTIONS']['STRICT_PRIORITY'] must be True or False, "
                f"got {strict!r}"
            )
        self.strict_priority = strict
        limit = self.options.get("MAX_ARGS_BYTES", DEFAULT_MAX_CARRY_BYTES)
        if type(limit) is not int or not 1 <= limit <= MAX_ARGS_CEILING:
            raise InvalidTask(
                f"TASKS[{alias!r}]['OPTIONS']['MAX_ARGS_BYTES'] must be an integer from 1 "
                f"to {MAX_ARGS_CEILING}, got {limit!r}"
            )
        self.max_args_bytes = limit
        for queue in self.queues:
            self._check_queue(queue)

    @property
    def database(self) -> str:
        return str(self.options.get("DATABASE") or config.database())

    @property
    def schema(self) -> str:
        return str(self.options.get("SCHEMA") or config.schema())

    def _check_queue(self, queue: str) -> None:
        try:
            venturi.task(kind_of(queue))  # checks the kind, registers nothing
        except venturi.ConfigError as exc:
            raise InvalidTask(f"queue {queue!r} cannot be a venturi kind: {exc}") from None

    def check(self, **kwargs: Any) -> Iterator[Any]:
        """Django's system checks of this backend: the app must be installed, or no
        ``migrate`` applies the schema and the first enqueue fails on a missing table."""
        yield from super().check(**kwargs)
        if not apps.is_installed(APP):
            yield checks.Error(
                f"{APP} is not in INSTALLED_APPS: manage.py migrate does not apply "
                "venturi's schema, so every enqueue through this backend fails",
                hint=f'add "{APP}" to INSTALLED_APPS, then run manage.py migrate',
                obj=f"TASKS[{self.alias!r}]",
                id="venturi.E001",
            )

    def validate_task(self, task: Any) -> None:
        super().validate_task(task)
        self._check_queue(task.queue_name)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        carry = DjangoCall(
            task=task.module_path,
            args=normalize_json(list(args)),
            kwargs=normalize_json(dict(kwargs)),
            backend=self.alias,
            queue_name=task.queue_name,
            priority=task.priority,
            run_after=task.run_after,
            max_attempts=self.max_attempts,
        )
        tier = venturi.Priority.NORMAL if self.strict_priority else tier_of(task.priority)
        try:
            spec = runner(task.queue_name).job(carry, priority=tier, at=task.run_after)
        except (TypeError, ValueError) as exc:
            raise _arguments_refused(exc, kind_of(task.queue_name), task.module_path) from None
        size = len(spec.carry.encode())
        if size > self.max_args_bytes:
            raise ValueError(
                f"the arguments of task {task.module_path} are {size} bytes encoded, over "
                f"the limit of {self.max_args_bytes} "
                f"(TASKS[{self.alias!r}]['OPTIONS']['MAX_ARGS_BYTES'])"
            )
        # The group is checked where it is named (grouping.group()); one a running task
        # inherits is its own job's, which exists (an older release's with a line
        # separator too: checked again as new, every follow-up enqueue of such a task
        # failed, and the task died), as a spawned child takes its parent's.
        spec = msgspec.structs.replace(
            spec, max_failures=self.max_attempts, group=grouping.current_group()
        )
        job_id, enqueued_at = self._insert(spec, rank=-task.priority)
        result = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=carry.args,
            kwargs=carry.kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def _insert(self, spec: Any, rank: int) -> tuple[int, datetime]:
        """Insert the job with its rank in one transaction (the caller's atomic block,
        else one of its own); its id and created_at, the enqueuing transaction's clock
        that get_result() reads too (Python's clock after the insert is another)."""
        conn = config.connection(self.database)
        with transaction.atomic(using=conn.alias):
            job_id = db.enqueue.job_insert_sync(conn, schema=self.schema, spec=spec)
            if rank:
                created_at = db.enqueue.job_rank_set_sync(
                    conn, schema=self.schema, job_id=job_id, rank=rank
                )
            else:  # the column's default: nothing to write, only the clock to read
                job = venturi.get_job_sync(conn, job_id, schema=self.schema)
                created_at = None if job is None else job.created_at
        if created_at is None:  # inserted by this very transaction: it cannot be missing
            raise TaskResultDoesNotExist(str(job_id))
        return job_id, created_at

    def get_result(self, result_id: str) -> Any:
        try:
            job_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        conn = config.connection(self.database)
        found = get_job_and_journal_sync(conn, job_id, schema=self.schema)
        if found is None or not found[0].kind.startswith(KIND_PREFIX):
            raise TaskResultDoesNotExist(result_id)
        return result_of(*found)


def result_of(job: JobInfo, journal: list[JournalEntry]) -> Any:
    """The ``TaskResult`` a venturi job of a Django task stands for."""
    carry = msgspec.convert(job.carry, DjangoCall)
    task = _task_of(carry)
    # One worker per attempt: who claimed it (a failed claim's worker is on its entry).
    workers: dict[int, str] = {}
    for e in journal:
        if e.attempt > 0 and e.worker is not None:
            workers.setdefault(e.attempt, e.worker)
    attempts = [e.at for e in journal if e.event == JournalEvent.CLAIMED] + [
        e.at for e in journal if e.event in _FAILURES
    ]
    result = TaskResult(
        task=task,
        id=str(job.id),
        status=_STATUS.get(job.status, TaskResultStatus.FAILED),
        enqueued_at=job.created_at,
        started_at=min(attempts) if attempts else None,
        finished_at=job.finished_at,
        last_attempted_at=job.claimed_at or (max(attempts) if attempts else None),
        args=carry.args,
        kwargs=carry.kwargs,
        backend=carry.backend,
        errors=_errors(journal),
        worker_ids=[workers[a] for a in sorted(workers)],
    )
    if job.status == JobStatus.COMPLETED:
        object.__setattr__(result, "_return_value", job.result)
    return result


def _errors(journal: list[JournalEntry]) -> list[Any]:
    """One ``TaskError`` per failed attempt, as Django's backends keep one per raise: each
    attempt's failure entry, or its dead entry when it settled dead without one (its task
    could not be imported). Not an error: the dead entry after an attempt's failure (the
    backstop's line), nor an operator's retry of the dead job (a ``retried`` entry too,
    under the failed attempt's number, with the detail ``manual retry``)."""
    errors: dict[int, Any] = {}
    for e in journal:
        if e.event in _FAILURES and e.detail != MANUAL_RETRY:
            errors.setdefault(e.attempt, _task_error(e.detail or ""))
    for e in journal:
        if e.event == JournalEvent.DEAD:
            errors.setdefault(e.attempt, _task_error(e.detail or ""))
    return [errors[a] for a in sorted(errors)]


def venturi_backends() -> list[Any]:
    """Every ``TASKS`` backend of the project that is a ``VenturiBackend``."""
    return [b for b in task_backends.all() if isinstance(b, VenturiBackend)]
