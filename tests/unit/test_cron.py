"""Cron expressions read in a time zone (venturi.cronspec) and schedules checked where they
are declared (venturi.schedules); no database."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

import venturi
from tests.support import Item as Needs
from venturi import ConfigError, Context
from venturi.cronspec import CronSpec
from venturi.maintenance import cron
from venturi.schedules import declared, unschedule


@pytest.fixture
def schedules() -> Iterator[None]:
    """Schedules a test declares with venturi.schedule: forgotten after the test."""
    before = set(declared())
    yield
    for name in set(declared()) - before:
        unschedule(name)


class Tick(msgspec.Struct):
    label: str = "tick"


def test_slots_are_read_in_the_time_zone() -> None:
    paris = CronSpec("0 9 * * *", "Europe/Paris")
    now = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
    assert paris.latest(now) == datetime(2025, 1, 15, 8, 0, tzinfo=UTC)  # CET = UTC+1
    assert paris.next_after(now) == datetime(2025, 1, 16, 8, 0, tzinfo=UTC)
    summer = datetime(2025, 7, 15, 12, 0, tzinfo=UTC)
    assert paris.latest(summer) == datetime(2025, 7, 15, 7, 0, tzinfo=UTC)  # CEST = UTC+2
    utc = CronSpec("*/5 * * * *")
    assert utc.tz == "UTC"
    assert utc.latest(datetime(2025, 1, 1, 12, 5, tzinfo=UTC)) == datetime(
        2025, 1, 1, 12, 5, tzinfo=UTC
    )  # a slot at exactly now is due now
    assert utc.next_after(datetime(2025, 1, 1, 12, 5, tzinfo=UTC)) == datetime(
        2025, 1, 1, 12, 10, tzinfo=UTC
    )


def test_daylight_saving_changes_run_a_daily_slot_once() -> None:
    paris = "Europe/Paris"
    daily = CronSpec("30 2 * * *", paris)

    def slots_on(spec: CronSpec, day: str) -> list[datetime]:
        start = datetime.fromisoformat(f"{day}T00:00:00").replace(tzinfo=spec.zone)
        end = start + timedelta(days=1)
        found, t = [], spec.next_after(start - timedelta(microseconds=1))
        while t < end:
            found.append(t)
            t = spec.next_after(t)
        return found

    # Clocks go forward at 02:00 on 2025-03-30: 02:30 does not exist; it runs once.
    assert len(slots_on(daily, "2025-03-30")) == 1
    # Clocks go back at 03:00 on 2025-10-26: 02:30 happens twice; it runs once, the first.
    [fall] = slots_on(daily, "2025-10-26")
    assert fall == datetime(2025, 10, 26, 0, 30, tzinfo=UTC)  # 02:30 CEST
    assert daily.latest(datetime(2025, 10, 26, 1, 45, tzinfo=UTC)) == fall
    # A step over hours runs through the repeated hour: every 30 minutes of real time.
    steps = slots_on(CronSpec("*/30 * * * *", paris), "2025-10-26")
    assert len(steps) == 50
    assert all(b - a == timedelta(minutes=30) for a, b in itertools.pairwise(steps))


def test_seconds_field_and_aliases() -> None:
    every_second = CronSpec("* * * * * *")
    now = datetime(2025, 1, 1, 0, 0, 7, 500_000, tzinfo=UTC)
    assert every_second.latest(now) == datetime(2025, 1, 1, 0, 0, 7, tzinfo=UTC)
    assert CronSpec("@daily").next_after(now) == datetime(2025, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "tz", "match"),
    [
        ("", None, "cron must be"),
        (5, None, "cron must be"),
        ("* * *", None, "5 fields"),
        ("* * * * * * *", None, "5 fields"),
        ("61 * * * *", None, "invalid"),
        ("0 0 31 2 *", None, "never matches"),
        ("H * * * *", None, "random"),
        ("R * * * *", None, "random"),
        ("@sometimes", None, "alias"),
        ("* * * * *", "Mars/Olympus", "unknown time zone"),
        ("* * * * *", 3, "tz must be"),
        ("* * * * *", "localtime", "each host's own"),
        ("* * * * *", "posixrules", "each host's own"),
        ("* * * * *", "Factory", "each host's own"),
        ("* * * * *", "posix/localtime", "each host's own"),
    ],
)
def test_bad_cron(expression: Any, tz: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CronSpec(expression, tz)


def test_task_cron_is_checked_when_declared(kinds: list[str]) -> None:
    with pytest.raises(ConfigError, match="invalid"):

        @venturi.task(kind="c_bad", cron="not a cron at all")
        async def bad(ctx: Context[Any], carry: Tick) -> None: ...

    with pytest.raises(ConfigError, match="tz applies to a cron"):

        @venturi.task(kind="c_tz", tz="Europe/Paris")
        async def tz_only(ctx: Context[Any], carry: Tick) -> None: ...

    with pytest.raises(ConfigError, match="build with no arguments"):

        @venturi.task(kind="c_needs", cron="* * * * *")
        async def needs(ctx: Context[Any], carry: Needs) -> None: ...

    @venturi.task(kind="c_none", cron="@hourly", tz="Europe/Paris")
    async def no_carry(ctx: Context[Any], carry: None) -> None: ...

    assert no_carry.cron == CronSpec("@hourly", "Europe/Paris") and no_carry.cron_carry is None


def test_schedule_checks_its_carry_and_name(kinds: list[str], schedules: None) -> None:
    @venturi.task(kind="c_sched")
    async def handler(ctx: Context[Any], carry: Needs) -> None: ...

    with pytest.raises(ConfigError, match="build with no arguments"):
        venturi.schedule(handler, "* * * * *")
    with pytest.raises(ConfigError, match="must be Item"):
        venturi.schedule(handler, "* * * * *", Tick())
    first = venturi.schedule(handler, "0 * * * *", Needs(1))
    assert first.name == "c_sched@0 * * * *"
    assert venturi.schedule(handler, "0 * * * *", Needs(1)).name == first.name  # same: fine
    with pytest.raises(ConfigError, match="already declared"):
        venturi.schedule(handler, "0 * * * *", Needs(2))
    other = venturi.schedule(handler, "0 * * * *", Needs(2), name="second", tz="Asia/Tokyo")
    assert {s.name for s in cron.schedules_for(["c_sched"])} == {first.name, other.name}
    assert cron.schedules_for(["elsewhere"]) == []


@pytest.mark.parametrize("name", ["nightly\x00report", "nightly\ud800"])
def test_a_schedule_name_the_database_cannot_store_is_refused(
    name: str, kinds: list[str], schedules: None
) -> None:
    @venturi.task(kind="c_badname")
    async def handler(ctx: Context[Any], carry: Tick) -> None: ...

    with pytest.raises(ConfigError, match="NUL characters or lone surrogates") as caught:
        venturi.schedule(handler, "* * * * *", name=name)
    assert "\n" not in str(caught.value)
    assert declared() == {}


def test_a_schedule_named_after_a_cron_task_is_refused(kinds: list[str], schedules: None) -> None:
    @venturi.task(kind="c_own", cron="0 * * * *")
    async def own(ctx: Context[Any], carry: Tick) -> None: ...

    with pytest.raises(ConfigError, match="'c_own' is the name of task 'c_own''s own") as caught:
        venturi.schedule(own, "30 * * * *", Tick("half past"), name="c_own")
    assert "\n" not in str(caught.value)
    assert declared() == {}
