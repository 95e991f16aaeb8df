"""The task decorator, priorities, backoff and outcomes: every knob checked up front."""

from __future__ import annotations

import asyncio
import importlib
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import venturi
from tests.support import Item as Carry
from venturi import Backoff, ConfigError, Context, Priority
from venturi.outcomes import Complete, Dead, Pause, Retry
from venturi.tasks import registered


def test_public_api_is_small_and_explicit() -> None:
    assert sorted(venturi.__all__) == sorted(
        [
            "Alerts",
            "Backoff",
            "Child",
            "ChildFailed",
            "ClaimLost",
            "ConfigError",
            "ConnectError",
            "Context",
            "CronScheduler",
            "DuplicateJob",
            "JobInfo",
            "JobMeta",
            "JobSpec",
            "JournalEntry",
            "Outcome",
            "Priority",
            "QueueGauges",
            "Rate",
            "ResultCleanup",
            "Retention",
            "SchemaError",
            "SignalTimeout",
            "Task",
            "UnservedKinds",
            "VenturiError",
            "Worker",
            "WorkerGroup",
            "Workflow",
            "complete",
            "dead",
            "delete_job",
            "enqueue_many",
            "enqueue_many_sync",
            "get_job",
            "get_job_sync",
            "get_journal",
            "get_journal_sync",
            "get_result",
            "pause",
            "retry",
            "schedule",
            "set_group",
            "set_group_sync",
            "signal",
            "signal_sync",
            "task",
            "wait",
        ]
    )


def test_the_old_registry_module_warns_and_still_serves_its_names() -> None:
    sys.modules.pop("venturi.registry", None)
    with pytest.warns(DeprecationWarning, match="venturi.tasks"):
        old = importlib.import_module("venturi.registry")
    assert old.task is venturi.task
    assert old.JobSpec is venturi.JobSpec
    assert old.registered is registered
    # Reached as an attribute of the package too, as when __init__ imported it.
    assert venturi.registry is old  # type: ignore[attr-defined]
    for name in venturi.__all__:
        assert hasattr(venturi, name), name


def test_priority_tiers_are_stored_smallints() -> None:
    assert [int(p) for p in (Priority.HIGH, Priority.NORMAL, Priority.LOW)] == [0, 1, 2]


def test_task_registers_and_reads_carry_type(kinds: list[str]) -> None:
    @venturi.task(
        kind="t_reads",
        priority=Priority.HIGH,
        lease=timedelta(minutes=5),
        cap=2,
        timeout=10,
        max_failures=3,
    )
    async def handler(ctx: Context[Any], carry: Carry) -> None:
        return None

    assert registered()["t_reads"] is handler
    assert handler.carry_type is Carry
    assert handler.priority is Priority.HIGH
    assert handler.lease == 300.0 and handler.cap == 2 and handler.timeout == 10.0
    assert handler.max_failures == 3
    assert handler.is_async


def test_task_is_still_callable_for_tests(kinds: list[str]) -> None:
    @venturi.task(kind="t_callable")
    async def handler(ctx: Context[Any], carry: Carry) -> venturi.Outcome:
        return venturi.complete(carry.n * 2)

    meta = venturi.JobMeta(1, "t_callable", Priority.NORMAL, 1, 0, datetime.now(UTC))
    out = asyncio.run(handler(Context(None, meta), Carry(21)))
    assert out == Complete(42)


def test_string_annotations_resolve(kinds: list[str]) -> None:
    ns: dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "import venturi, msgspec\n"
        "class C(msgspec.Struct):\n    x: int\n"
        "@venturi.task(kind='t_future')\n"
        "async def h(ctx: venturi.Context[Missing], carry: C) -> None: ...\n",
        ns,
    )
    assert ns["h"].carry_type is ns["C"]


def test_generic_carry_types_allowed(kinds: list[str]) -> None:
    @venturi.task(kind="t_generic")
    def handler(ctx: Context[Any], carry: dict[str, int]) -> None:
        return None

    assert not handler.is_async
    assert handler.codec.encode({"a": 1}) == '{"a":1}'
    with pytest.raises(TypeError, match="carry of task 't_generic'"):
        handler.codec.encode({"a": "x"})


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"lease": 0}, "lease"),
        ({"lease": -5}, "lease"),
        ({"lease": "5m"}, "lease"),
        ({"timeout": timedelta(0)}, "timeout"),
        ({"cap": 0}, "cap"),
        ({"cap": 1.5}, "cap"),
        ({"max_failures": 0}, "max_failures"),
        ({"priority": 7}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"backoff": 5}, "backoff"),
        ({"max_carry_bytes": 0}, "max_carry_bytes"),
        # Past PostgreSQL's integer: accepted here, they failed later in the database (a
        # worker's claim retried for good, an enqueue with the driver's error).
        ({"cap": 2**31}, "cap must be at most 2,147,483,647"),
        ({"global_cap": 2**31}, "global_cap must be at most"),
        ({"group_cap": 2**31}, "group_cap must be at most"),
        ({"max_failures": 2**31}, "max_failures must be at most"),
    ],
)
def test_bad_task_arguments_name_the_knob(kwargs: dict[str, Any], knob: str) -> None:
    with pytest.raises(ConfigError, match=knob):
        venturi.task(kind="t_bad", **kwargs)


def test_integer_knobs_reach_postgresqls_integer_and_no_further(kinds: list[str]) -> None:
    venturi.task(kind="t_int_max", cap=2**31 - 1, group_cap=2**31 - 1, global_cap=2**31 - 1)
    assert venturi.Rate(per_second=1, burst=2**31 - 1).burst == 2**31 - 1
    with pytest.raises(ConfigError, match="rate burst must be at most 2,147,483,647"):
        venturi.Rate(per_second=1, burst=2**31)
    with pytest.raises(ConfigError, match="concurrency must be at most"):
        venturi.Worker(None, "postgresql://127.0.0.1/x", [], concurrency=2**31)


@pytest.mark.parametrize("kind", ["", "  x", "a,b", 5, "x" * 201, "k\x00"])
def test_bad_kind_refused(kind: Any) -> None:
    with pytest.raises(ConfigError, match="kind"):
        venturi.task(kind=kind)


def test_missing_carry_annotation(kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="carry"):

        @venturi.task(kind="t_noann")
        async def handler(ctx, carry):  # type: ignore[no-untyped-def]
            return None

    assert "t_noann" not in registered()


def test_handler_needs_two_parameters(kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"\(ctx, carry\)"):

        @venturi.task(kind="t_onearg")  # type: ignore[arg-type]  # one parameter on purpose
        async def handler(ctx: Any) -> None:
            return None


def test_unsupported_carry_type(kinds: list[str]) -> None:
    class NotMsgspec:
        pass

    with pytest.raises(ConfigError, match="carry"):

        @venturi.task(kind="t_weird")
        async def handler(ctx: Any, carry: NotMsgspec) -> None:
            return None


def test_duplicate_kind_is_an_error(kinds: list[str]) -> None:
    @venturi.task(kind="t_dup")
    async def first(ctx: Any, carry: Carry) -> None:
        return None

    with pytest.raises(ConfigError, match="already declared"):

        @venturi.task(kind="t_dup")
        async def second(ctx: Any, carry: Carry) -> None:
            return None

    assert registered()["t_dup"] is first


def test_backoff_policies() -> None:
    fixed = Backoff.fixed(timedelta(seconds=3))
    assert [fixed.delay(n) for n in (1, 2, 10)] == [3.0, 3.0, 3.0]
    exp = Backoff.exponential(1.0, factor=2.0, cap=10.0, jitter=False)
    assert [exp.delay(n) for n in (1, 2, 3, 4, 5, 100, 10_000)] == [1, 2, 4, 8, 10, 10, 10]
    jittered = Backoff.exponential(4.0, cap=100.0, jitter=True)
    for _ in range(100):
        assert 2.0 <= jittered.delay(1) <= 4.0
    with pytest.raises(ConfigError, match="factor"):
        Backoff.exponential(1.0, factor=0.5)
    with pytest.raises(ConfigError, match="cap"):
        Backoff.exponential(10.0, cap=1.0)
    with pytest.raises(ConfigError, match="base"):
        Backoff.exponential(0)
    with pytest.raises(ConfigError, match="factor must be a number >= 1, got nan"):
        Backoff.exponential(1.0, factor=float("nan"))
    # Built directly, it is checked too: a base of 1e15 s passed, and each retry's time
    # then failed to be stored (its job went dead).
    with pytest.raises(ConfigError, match="backoff base must be at most 100 years"):
        Backoff(base=1e15, cap=1e16)
    with pytest.raises(ConfigError, match="backoff base must be non-negative"):
        Backoff(base=-1.0)
    with pytest.raises(ConfigError, match="cap"):
        Backoff(base=10.0, cap=1.0)
    assert Backoff(base=2.0, cap=4.0).delay(5) <= 4.0


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"lease": 1e14}, "lease"),
        ({"timeout": 1e15}, "timeout"),
        ({"unique_for": 1e15}, "unique_for"),
    ],
)
def test_durations_stop_at_a_hundred_years(kwargs: dict[str, Any], knob: str) -> None:
    # A lease of 1e14 s passed, and every claim of its kind then failed in the database
    # ("timestamp out of range"), retried for good.
    with pytest.raises(ConfigError, match=f"{knob} must be at most 100 years"):
        venturi.task(kind="t_long", **kwargs)
    with pytest.raises(ConfigError, match="retry after must be at most 100 years"):
        venturi.retry(after=1e15)


def test_a_rate_gives_a_token_at_least_once_a_hundred_years() -> None:
    # Its token's wait becomes a group's wake-up time: at 1e-300 a second every grouped
    # claim of the kind failed in the database ("timestamp out of range").
    assert venturi.Rate(per_second=1 / (36_525 * 86_400)).per_second > 0
    with pytest.raises(ConfigError, match="at least one token per 100 years"):
        venturi.Rate(per_second=1e-300)
    # A refill is the seconds idle times per_second: at 1e308, two idle seconds
    # overflowed float8 in the claim.
    assert venturi.Rate(per_second=1e9).per_second == 1e9
    with pytest.raises(ConfigError, match="rate per_second must be at most 1,000,000,000"):
        venturi.Rate(per_second=1e308)


def test_outcome_constructors() -> None:
    assert venturi.complete() == Complete(None)
    assert venturi.pause(Carry(1), after=timedelta(seconds=2)) == Pause(Carry(1), 2.0, None)
    at = datetime.now(UTC)
    assert venturi.pause(Carry(1), at=at).at == at
    assert venturi.retry() == Retry(None, False, None, "")
    assert venturi.retry(Carry(2), after=5, reason="busy") == Retry(Carry(2), True, 5.0, "busy")
    assert venturi.dead("gone") == Dead("gone")
    with pytest.raises(ConfigError, match="not both"):
        venturi.pause(Carry(1), after=1, at=at)
    with pytest.raises(ConfigError, match="timezone"):
        venturi.pause(Carry(1), at=datetime(2026, 1, 1))
    with pytest.raises(ConfigError, match="retry after"):
        venturi.retry(after=-1)
