"""A worker's configuration, validated once: ``WorkerConfig`` (the worker-wide knobs)
and ``KindPolicy`` (what the worker does for one registered kind: its lease, renewal,
caps, rate and retry backoff), both read by the loop's parts instead of per-kind maps.

Every check raises ``ConfigError`` naming the knob, in the order ``Worker`` takes them,
so the first bad knob is the one reported.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from venturi import sql, validate
from venturi.backoff import DEFAULT_BACKOFF, Backoff
from venturi.errors import ConfigError
from venturi.middleware import Middleware
from venturi.middleware import check as middleware_check
from venturi.rate import Rate
from venturi.runtime.maintainer import MaintenanceTask
from venturi.runtime.maintainer import check as maintenance_check
from venturi.tasks import Task

T = TypeVar("T")

# The default statement deadline, and its floor when a short lease caps it.
DEFAULT_STATEMENT_TIMEOUT = 30.0
MIN_STATEMENT_TIMEOUT = 1.0
# The fewest connections a worker's pool may hold: the LISTEN session holds one, the
# loop one, and the heartbeat, recovery and maintenance take turns on a third. With one,
# the worker waited for a second for good, silent and deaf to its shutdown; with two,
# recovery and the heartbeat waited behind the loop (an expired claim stayed claimed).
MIN_POOL_SIZE = 3
# The most slots one worker may run. Each slot is paid for up front, not as work comes:
# the worker's own pool holds a connection holder for each (a handler's ctx.transaction()
# takes one, so the pool is 3 + concurrency), sync handlers get a thread each, and a claim
# asks for as many jobs as slots are free. Unbounded, 1,000,000 took 20 s to stop,
# 3,000,000 raised MemoryError and 100,000,000 took 24 GB before the OOM killer ended
# it. 10,000 costs about 20 MB and well under a second, and is far past what one process
# can serve: PostgreSQL allows 100 connections by default, and more throughput comes
# from more processes (--processes).
MAX_CONCURRENCY = 10_000


def default_concurrency() -> int:
    """``max(1, min(8, cores // 2))``: a safe floor, not an optimum. Handlers are mostly
    I/O-bound, so cores are a weak guide; measure and set ``concurrency`` for the load."""
    return max(1, min(8, (os.cpu_count() or 1) // 2))


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class WorkerConfig:
    """The worker-wide knobs, checked by ``build``. Mutable only so that a ``Worker``
    attribute set after construction (``WorkerGroup`` numbers ``claimed_by``) still
    reaches the next run, as it always has."""

    dsn: str | None
    pool: Any
    listen_dsn: str | None
    concurrency: int
    priority_ratio: int | None
    claimed_by: str
    failures_to_dead: bool
    backoff: Backoff
    renew_lease: bool
    heartbeat: float
    metrics: bool
    metrics_port: int | None
    poll_max: float
    lease: float
    shutdown_timeout: float
    statement_timeout: float | None
    synchronous_commit: bool
    schema: str
    maintenance: list[MaintenanceTask]
    middleware: list[Middleware]

    @classmethod
    def build(
        cls,
        pool_or_dsn: Any,
        *,
        concurrency: int | None = None,
        poll_max: timedelta | float = 30.0,
        lease: timedelta | float = 900.0,
        shutdown_timeout: timedelta | float = 30.0,
        priority_ratio: int | None = 4,
        claimed_by: str | None = None,
        failures_to_dead: bool = False,
        backoff: Backoff = DEFAULT_BACKOFF,
        schema: str = sql.DEFAULT_SCHEMA,
        maintenance: Iterable[MaintenanceTask] = (),
        renew_lease: bool = False,
        heartbeat: timedelta | float = 1.0,
        metrics: bool = False,
        metrics_port: int | None = None,
        statement_timeout: timedelta | float | None = None,
        listen_dsn: str | None = None,
        middleware: Iterable[Middleware] = (),
        synchronous_commit: bool = True,
    ) -> WorkerConfig:
        """Check every knob (``Worker``'s keywords, same meaning) and resolve defaults."""
        dsn, pool = validate.pool_or_dsn(pool_or_dsn, "pool_or_dsn")
        size = getattr(pool, "get_max_size", None)
        if size is not None and size() < MIN_POOL_SIZE:
            raise ConfigError(
                f"pool_or_dsn: the worker's pool must hold at least {MIN_POOL_SIZE} "
                f"connections, got {size()} (max_size)"
            )
        if listen_dsn is not None:
            validate.non_empty_str(listen_dsn, "listen_dsn")
        if concurrency is None:
            concurrency = default_concurrency()
        concurrency = validate.integer(concurrency, "concurrency")
        if concurrency > MAX_CONCURRENCY:
            raise ConfigError(
                f"concurrency must be at most {MAX_CONCURRENCY:,} (add processes for more), "
                f"got {concurrency:,}"
            )
        if priority_ratio is not None:
            validate.integer(
                priority_ratio, "priority_ratio", minimum=2, hint=", or None for strict priority"
            )
        if claimed_by is not None:
            validate.non_empty_str(claimed_by, "claimed_by")
        failures_to_dead = validate.boolean(failures_to_dead, "failures_to_dead")
        backoff = validate.instance(backoff, Backoff, "backoff", "a venturi.Backoff")
        renew_lease = validate.boolean(renew_lease, "renew_lease")
        beat = validate.seconds(heartbeat, "heartbeat")
        if metrics_port is not None:
            validate.port(metrics_port, "metrics_port")
        return cls(
            dsn=dsn,
            pool=pool,
            listen_dsn=listen_dsn,
            concurrency=concurrency,
            priority_ratio=priority_ratio,
            claimed_by=claimed_by or default_identity(),
            failures_to_dead=failures_to_dead,
            backoff=backoff,
            renew_lease=renew_lease,
            heartbeat=beat,
            metrics=validate.boolean(metrics, "metrics") or metrics_port is not None,
            metrics_port=metrics_port,
            poll_max=validate.seconds(poll_max, "poll_max"),
            lease=validate.seconds(lease, "lease"),
            shutdown_timeout=validate.seconds(
                shutdown_timeout, "shutdown_timeout", allow_zero=True
            ),
            statement_timeout=(
                None
                if statement_timeout is None
                else validate.seconds(statement_timeout, "statement_timeout")
            ),
            synchronous_commit=validate.boolean(synchronous_commit, "synchronous_commit"),
            schema=sql.validate_schema(schema),
            maintenance=maintenance_check(list(maintenance)),
            middleware=middleware_check(middleware),
        )

    def statement_deadline(self) -> float:
        """The longest any statement of the worker's loop, heartbeat or LISTEN health
        check may take, in seconds: ``statement_timeout`` when set; by default 30 s,
        capped at half the worker's ``lease`` (never below 1 s), since a worker that
        cannot reach the database for a lease has lost its claims anyway. (Not a task's
        own shorter lease: one 1 s-lease kind would put a 1 s deadline on every claim.)"""
        if self.statement_timeout is not None:
            return self.statement_timeout
        return max(MIN_STATEMENT_TIMEOUT, min(DEFAULT_STATEMENT_TIMEOUT, self.lease / 2))


@dataclass(frozen=True)
class Registration:
    """A kind as ``Worker.register`` was given it: the task and this worker's overrides
    (None: the task's own, then the worker's)."""

    task: Task[Any]
    cap: int | None = None
    rate: Rate | None = None
    renew_lease: bool | None = None
    global_cap: int | None = None

    @classmethod
    def check(
        cls,
        task: Task[Any],
        cap: int | None,
        rate: Rate | None,
        renew_lease: bool | None,
        global_cap: int | None,
    ) -> Registration:
        """``ConfigError`` naming the first bad argument of ``Worker.register``."""
        validate.instance(task, Task, "tasks", "declared with @venturi.task")
        if cap is not None:
            validate.integer(cap, "cap")
        if rate is not None:
            validate.instance(rate, Rate, "rate", "a venturi.Rate")
        if renew_lease is not None:
            validate.boolean(renew_lease, "renew_lease")
        if global_cap is not None:
            validate.integer(global_cap, "global_cap")
        return cls(task, cap, rate, renew_lease, global_cap)

    def policy(self, config: WorkerConfig) -> KindPolicy:
        """This kind's policy under ``config``: each knob the override, else the task's,
        else the worker's."""
        t = self.task
        renew = self.renew_lease
        return KindPolicy(
            task=t,
            lease=t.lease or config.lease,
            renew=renew if renew is not None else (t.renew_lease or config.renew_lease),
            cap=self.cap if self.cap is not None else t.cap,
            global_cap=self.global_cap if self.global_cap is not None else t.global_cap,
            rate=self.rate if self.rate is not None else t.rate,
            backoff=t.backoff if t.backoff is not None else config.backoff,
        )


@dataclass(frozen=True)
class KindPolicy:
    """What one worker run does for one kind: ``lease`` seconds per claim, renewed by the
    heartbeat when ``renew``; at most ``cap`` running here and ``global_cap`` across
    every worker; claims within ``rate``; failures retried after ``backoff``."""

    task: Task[Any]
    lease: float
    renew: bool
    cap: int | None
    global_cap: int | None
    rate: Rate | None
    backoff: Backoff


def policies(registered: Iterable[Registration], config: WorkerConfig) -> dict[str, KindPolicy]:
    """Each registered kind's policy under ``config``, by kind."""
    return {r.task.kind: r.policy(config) for r in registered}


class Setting(Generic[T]):
    """A ``Worker`` attribute that reads and writes the field of the same name of the
    worker's ``config``, so the knobs live in one place and keep their public names."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object | None, owner: type) -> T | Setting[T]:
        if obj is None:
            return self
        value: T = getattr(obj.config, self.name)  # type: ignore[attr-defined]
        return value

    def __set__(self, obj: object, value: T) -> None:
        setattr(obj.config, self.name, value)  # type: ignore[attr-defined]


def check_tasks(tasks: Any, knob: str) -> list[Task[Any]]:
    """``tasks`` as a list, or ``ConfigError`` naming ``knob``: one task given where a list
    belongs raised Python's bare "'Task' object is not iterable"."""
    if isinstance(tasks, Task):
        raise ConfigError(
            f"{knob} must be a list of tasks, got one task ({tasks.kind!r}): wrap it in a list"
        )
    if isinstance(tasks, str) or not isinstance(tasks, Iterable):
        raise ConfigError(f"{knob} must be a list of tasks, got {validate.shown(tasks)}")
    return list(tasks)
