"""Tasks: the ``@venturi.task`` decorator, the ``Task`` it returns, the registry of kinds,
and ``enqueue_many`` (a batch of ``Task.job`` specs in one statement)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from venturi import db, kinds, validate
from venturi.backoff import Backoff
from venturi.codecs import CarryCodec
from venturi.context import Context
from venturi.cronspec import CronSpec
from venturi.db.enqueue import JobSpec
from venturi.errors import ConfigError
from venturi.groups import check_group
from venturi.handler_types import default_cron_carry, handler_carry_type
from venturi.kinds import Declared
from venturi.outcomes import Outcome
from venturi.priority import Priority
from venturi.rate import Rate
from venturi.sql import DEFAULT_SCHEMA
from venturi.traceparent import current_traceparent
from venturi.validate import seconds

if TYPE_CHECKING:
    from venturi.db.drivers import AsyncConnection, SyncConnection

C = TypeVar("C")

DEFAULT_MAX_FAILURES = 25
DEFAULT_MAX_CARRY_BYTES = 1 << 20

Handler = Callable[[Context[Any], Any], Awaitable[Outcome | None] | Outcome | None]

# What a handler of carry type C is: ``async def f(ctx: Context[S], carry: C)`` (or a
# plain def), returning an Outcome or None.
HandlerOf = Callable[[Context[Any], C], Awaitable[Outcome | None] | Outcome | None]


class TaskDecorator(Protocol):
    """What ``@venturi.task(kind)`` returns: it turns a handler of carry type ``C`` into a
    ``Task[C]``, so a type checker knows the carry ``enqueue`` takes."""

    def __call__(self, fn: HandlerOf[C], /) -> Task[C]: ...


def registered() -> dict[str, Task[Any]]:
    """A copy of the registry: kind -> task."""
    # Only a Task registers there (``task``, below): the entries are Tasks.
    return cast("dict[str, Task[Any]]", kinds.registered())


def unregister(kind: str) -> None:
    """Forget a kind (tests that declare throwaway tasks use this)."""
    kinds.unregister(kind)


def as_priority(value: object, knob: str = "priority") -> Priority:
    if isinstance(value, Priority):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return Priority(value)
    raise ConfigError(f"{knob} must be a venturi.Priority, got {validate.shown(value)}")


def _positive_int(value: object, knob: str) -> int:
    return validate.integer(value, knob)


class Task(Declared, Generic[C]):
    """A registered job kind: its handler, carry codec and defaults.

    Awaiting ``task(ctx, carry)`` calls the handler directly, which is how unit tests
    exercise it without a worker.
    """

    def __init__(
        self,
        fn: Handler,
        kind: str,
        carry_type: Any,
        priority: Priority,
        lease: float | None,
        cap: int | None,
        timeout: float | None,
        max_failures: int,
        backoff: Backoff | None,
        max_carry_bytes: int,
        renew_lease: bool = False,
        rate: Rate | None = None,
        result_ttl: float | None = None,
        cron: CronSpec | None = None,
        cron_carry: Any = None,
        global_cap: int | None = None,
        unique_for: float | None = None,
        retry_on: tuple[type[BaseException], ...] | None = None,
        result_type: Any = Any,
        group_cap: int | None = None,
        group_rate: Rate | None = None,
    ) -> None:
        self.fn = fn
        self.kind = kind
        self.carry_type = carry_type
        self.priority = priority
        self.lease = lease
        self.cap = cap
        self.timeout = timeout
        self.max_failures = max_failures
        # None: the task declared no backoff, so the worker's ``backoff`` applies.
        self.backoff = backoff
        self.renew_lease = renew_lease
        self.rate = rate
        # Seconds a stored result stays readable after the job completes (None: forever).
        self.result_ttl = result_ttl
        # The recurring schedule of @task(cron=...) and the carry each slot's job gets.
        self.cron = cron
        self.cron_carry = cron_carry
        # At most this many jobs of the kind claimed across every worker together.
        self.global_cap = global_cap
        # Seconds a key stays held after its job finished (None: only while unfinished).
        self.unique_for = unique_for
        # The exceptions that are retried; any other settles the job dead at once
        # (None: every exception is retried).
        self.retry_on = retry_on
        self.result_type = result_type  # complete(result)'s type, for gather and result_of
        # SPEC 13: at most this many jobs of one group claimed at once, across every
        # worker; and a token bucket per group. A group's own setting (set_group) wins.
        self.group_cap = group_cap
        self.group_rate = group_rate
        self.is_async = inspect.iscoroutinefunction(fn)
        self.codec: CarryCodec[C] = CarryCodec(carry_type, kind, max_carry_bytes)
        self.__name__ = getattr(fn, "__name__", kind)
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"<venturi.Task {self.kind!r}>"

    def __call__(self, ctx: Context[Any], carry: C) -> Any:
        return self.fn(ctx, carry)

    def job(
        self,
        carry: C,
        *,
        priority: Priority | None = None,
        at: datetime | None = None,
        after: timedelta | float | None = None,
        key: str | None = None,
        group: str | None = None,
    ) -> JobSpec:
        """A job of this kind to pass to ``venturi.enqueue_many``; the carry is checked now.
        ``group``: the job's group (SPEC 13, docs/groups.md), None for none."""
        # Built positionally: a bulk enqueue makes one spec per job, and ten keywords
        # cost about 0.07 us more per spec (benchmarks/JOURNAL.md, "the client's part of
        # a bulk enqueue").
        if at is not None and after is not None:
            raise ConfigError("enqueue takes at or after, not both")
        if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
            raise ConfigError(f"at must be a timezone-aware datetime, got {validate.shown(at)}")
        if key is not None and not validate.storable(key):
            raise ConfigError(
                f"key must be a string without NUL characters or lone surrogates, got {validate.shown(key)}"
            )
        secs = None if after is None else seconds(after, "after", allow_zero=True)
        if group is not None:
            group = check_group(group)
        return JobSpec(
            self.kind,
            self.codec.encode(carry),
            int(self.priority if priority is None else as_priority(priority)),
            at,
            secs,
            key,
            self.max_failures,
            self.backoff,
            self.unique_for,
            group,
        )

    async def enqueue(
        self,
        conn: AsyncConnection,
        carry: C,
        *,
        priority: Priority | None = None,
        at: datetime | None = None,
        after: timedelta | float | None = None,
        key: str | None = None,
        on_conflict: str = "existing",
        schema: str = DEFAULT_SCHEMA,
        group: str | None = None,
    ) -> int:
        """Insert one job and return its id.

        ``conn`` is an asyncpg Connection or Pool, a psycopg AsyncConnection or
        AsyncConnectionPool, or a SQLAlchemy AsyncConnection, AsyncSession or
        AsyncEngine. On a connection or session with an open transaction the job
        commits or rolls back with it; without one, and on a pool or engine, it commits
        before this returns. Nothing is written if the carry is invalid.
        A ``key`` is held by its unfinished job (and, with the task's ``unique_for``, for
        that long after it finished); ``on_conflict`` says what an enqueue of a held key
        does: ``existing`` returns the holder's id, ``raise`` raises
        ``venturi.DuplicateJob``, ``replace`` gives a pending holder this carry, priority
        and visible time (a claimed or finished holder is left alone) and returns its id.
        ``group``: the job's group (SPEC 13, docs/groups.md), None for none.
        """
        mode = _on_conflict(on_conflict)
        spec = self.job(carry, priority=priority, at=at, after=after, key=key, group=group)
        return await db.enqueue.job_insert(
            conn,
            schema=schema,
            spec=spec,
            on_conflict=mode,
            traceparent=current_traceparent(),
        )

    def enqueue_sync(
        self,
        conn: SyncConnection,
        carry: C,
        *,
        priority: Priority | None = None,
        at: datetime | None = None,
        after: timedelta | float | None = None,
        key: str | None = None,
        on_conflict: str = "existing",
        schema: str = DEFAULT_SCHEMA,
        group: str | None = None,
    ) -> int:
        """``enqueue`` from synchronous code: ``conn`` is a psycopg Connection or
        ConnectionPool, a psycopg2 connection, a SQLAlchemy Connection, Session (or
        scoped_session) or Engine, or a Django connection; the same transaction rules
        and the same ``key``, ``on_conflict`` and ``group``."""
        mode = _on_conflict(on_conflict)
        spec = self.job(carry, priority=priority, at=at, after=after, key=key, group=group)
        return db.enqueue.job_insert_sync(
            conn,
            schema=schema,
            spec=spec,
            on_conflict=mode,
            traceparent=current_traceparent(),
        )


def _on_conflict(value: object) -> str:
    return validate.one_of(value, db.enqueue.ON_CONFLICT, "on_conflict")


def _specs(jobs: Iterable[JobSpec]) -> list[JobSpec]:
    specs = list(jobs)
    for spec in specs:
        if not isinstance(spec, JobSpec):
            raise TypeError(f"enqueue_many takes jobs built with task.job(...), got {spec!r}")
        # JobSpec is public and msgspec's replace() skips Task.job's checks; the database
        # refuses no group, and one it stored no operator's command could name.
        if spec.group is not None:
            check_group(spec.group)
    return specs


async def enqueue_many(
    conn: AsyncConnection,
    jobs: Iterable[JobSpec],
    *,
    on_conflict: str = "existing",
    schema: str = DEFAULT_SCHEMA,
) -> list[int]:
    """Insert many jobs (built with ``Task.job``); ids in input order. ``conn`` is any
    connection ``Task.enqueue`` takes, with the same transaction rules.

    All or nothing: one statement, or with keys one transaction (a savepoint inside the
    caller's open transaction). A held key (see ``Task.enqueue``) gives its holder's id,
    also when its holder commits while this call waits on it; with
    ``on_conflict="raise"`` it raises ``venturi.DuplicateJob`` and nothing is written,
    with ``"replace"`` a pending holder takes the row's carry, priority and visible time
    (a key given twice in one batch: the last row's values, one job)."""
    mode = _on_conflict(on_conflict)
    specs = _specs(jobs)
    if not specs:
        return []
    return await db.enqueue.job_insert_many(
        conn,
        schema=schema,
        specs=specs,
        on_conflict=mode,
        traceparent=current_traceparent(),
    )


def enqueue_many_sync(
    conn: SyncConnection,
    jobs: Iterable[JobSpec],
    *,
    on_conflict: str = "existing",
    schema: str = DEFAULT_SCHEMA,
) -> list[int]:
    """``enqueue_many`` on any connection ``Task.enqueue_sync`` takes."""
    mode = _on_conflict(on_conflict)
    specs = _specs(jobs)
    if not specs:
        return []
    return db.enqueue.job_insert_many_sync(
        conn,
        schema=schema,
        specs=specs,
        on_conflict=mode,
        traceparent=current_traceparent(),
    )


def task(
    kind: str,
    *,
    priority: Priority = Priority.NORMAL,
    lease: timedelta | float | None = None,
    cap: int | None = None,
    timeout: timedelta | float | None = None,
    max_failures: int = DEFAULT_MAX_FAILURES,
    backoff: Backoff | None = None,
    max_carry_bytes: int = DEFAULT_MAX_CARRY_BYTES,
    renew_lease: bool = False,
    rate: Rate | None = None,
    result_ttl: timedelta | float | None = None,
    cron: str | None = None,
    tz: str | None = None,
    global_cap: int | None = None,
    unique_for: timedelta | float | None = None,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    result: Any = Any,
    group_cap: int | None = None,
    group_rate: Rate | None = None,
) -> TaskDecorator:
    """Declare a job kind. Every argument is checked here; a bad one raises ConfigError.

    ``lease`` overrides the worker's default lease, ``cap`` is the default per-kind
    concurrency cap, ``timeout`` bounds one run, ``max_failures`` is the failure backstop
    and ``backoff`` the retry delay policy (None: the running worker's ``backoff``, by
    default exponential from 1 s, doubling, capped at 1 h, with jitter; a declared one is
    stored with each job, so recovery applies it even where the task is unknown). ``renew_lease`` keeps extending the claim
    while the handler runs (a crash is still detected within one lease); ``rate`` is a
    per-worker token bucket (``venturi.Rate``) on claims of this kind. ``result_ttl``
    is how long a completed job's result stays readable (``venturi.ResultCleanup`` clears
    it after); ``cron`` (read in time zone ``tz``, default UTC) enqueues the task on a
    schedule, run by ``venturi.CronScheduler``, with a carry built with no arguments.
    ``global_cap`` bounds the jobs of the kind claimed across every worker together
    (``cap`` bounds one worker's); ``unique_for`` keeps a key held for that long after
    its job finished; ``retry_on`` names the exceptions that are retried (any other
    settles the job dead at once; default: every exception is retried); ``result`` is the
    type ``complete(result)`` returns, as workflows' ``gather`` and ``result_of`` decode it.
    ``group_cap`` bounds the jobs of one group of the kind claimed at once across every
    worker, exactly; ``group_rate`` is a token bucket per group, across every worker
    whatever its ``shared`` (SPEC 13, docs/groups.md).
    """
    validate.kind(kind)
    prio = as_priority(priority)
    lease_s = None if lease is None else seconds(lease, "lease")
    cap_n = None if cap is None else _positive_int(cap, "cap")
    timeout_s = None if timeout is None else seconds(timeout, "timeout")
    failures_n = _positive_int(max_failures, "max_failures")
    carry_limit = _positive_int(max_carry_bytes, "max_carry_bytes")
    if backoff is not None and not isinstance(backoff, Backoff):
        raise ConfigError(
            f"backoff must be a venturi.Backoff (Backoff.fixed or Backoff.exponential), "
            f"got {validate.shown(backoff)}"
        )
    validate.boolean(renew_lease, "renew_lease")
    if rate is not None:
        validate.instance(rate, Rate, "rate", "a venturi.Rate")
    ttl_s = None if result_ttl is None else seconds(result_ttl, "result_ttl")
    if tz is not None and cron is None:
        raise ConfigError("tz applies to a cron schedule: pass cron= too")
    cron_spec = None if cron is None else CronSpec(cron, tz)
    global_cap_n = None if global_cap is None else _positive_int(global_cap, "global_cap")
    unique_s = None if unique_for is None else seconds(unique_for, "unique_for")
    retry_types = None if retry_on is None else validate.exception_types(retry_on, "retry_on")
    validate.decodable(result, "result")
    # "(or None)" as set_group(cap=) says it: one wording for a group's cap.
    group_cap_n = (
        None if group_cap is None else validate.integer(group_cap, "group_cap", hint=" (or None)")
    )
    if group_rate is not None:
        validate.instance(group_rate, Rate, "group_rate", "a venturi.Rate")

    def decorate(fn: HandlerOf[C]) -> Task[C]:
        return _declare(
            fn,
            kind,
            prio,
            lease_s,
            cap_n,
            timeout_s,
            failures_n,
            backoff,
            carry_limit,
            renew_lease,
            rate,
            ttl_s,
            cron_spec,
            global_cap=global_cap_n,
            unique_for=unique_s,
            retry_on=retry_types,
            result_type=result,
            group_cap=group_cap_n,
            group_rate=group_rate,
        )

    return decorate


def _declare(
    fn: HandlerOf[C],
    kind: str,
    priority: Priority,
    lease: float | None,
    cap: int | None,
    timeout: float | None,
    max_failures: int,
    backoff: Backoff | None,
    max_carry_bytes: int,
    renew_lease: bool,
    rate: Rate | None,
    result_ttl: float | None,
    cron: CronSpec | None,
    *,
    global_cap: int | None,
    unique_for: float | None,
    retry_on: tuple[type[BaseException], ...] | None,
    result_type: Any = Any,
    group_cap: int | None = None,
    group_rate: Rate | None = None,
) -> Task[C]:
    """The task of handler ``fn`` with ``task``'s checked knobs, registered under
    ``kind`` (the same function declared again, a module reloaded, replaces itself)."""
    if not callable(fn):
        raise ConfigError(f"task {kind!r}: the handler must be callable, got {validate.shown(fn)}")
    carry_type = handler_carry_type(fn, kind)
    existing = kinds.declared(kind)
    if isinstance(existing, Task) and _origin(existing.fn) != _origin(fn):
        raise ConfigError(f"kind {kind!r} is already declared by {'.'.join(_origin(existing.fn))}")
    t: Task[C] = Task(
        fn,
        kind,
        carry_type,
        priority,
        lease,
        cap,
        timeout,
        max_failures,
        backoff,
        max_carry_bytes,
        renew_lease,
        rate,
        result_ttl,
        cron,
        None if cron is None else default_cron_carry(carry_type, kind),
        global_cap=global_cap,
        unique_for=unique_for,
        retry_on=retry_on,
        result_type=result_type,
        group_cap=group_cap,
        group_rate=group_rate,
    )
    if cron is not None:
        # The default carry must also pass the task's own checks (type, size).
        try:
            t.codec.encode(t.cron_carry)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"task {kind!r}: cron: {exc}") from None
    kinds.register(t)
    return t


def _origin(fn: Callable[..., Any]) -> tuple[str, str]:
    return (getattr(fn, "__module__", "?") or "?", getattr(fn, "__qualname__", "?"))
