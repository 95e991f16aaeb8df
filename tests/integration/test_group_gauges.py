"""The groups' gauges (SPEC 13) against a real database: ``venturi_groups{kind}`` counts a
kind's groups with pending or claimed jobs, and per-group series exist only for the 20
groups of each kind with the most pending jobs, so they stay bounded; a group that
leaves the top 20 loses its series at the next read."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import pytest

import venturi
from tests.support import Item
from venturi import Context, db
from venturi.maintenance import gauges

pytest.importorskip("prometheus_client")

S = "venturi"


def exposition() -> str:
    from prometheus_client import REGISTRY, generate_latest

    return generate_latest(REGISTRY).decode()


def group_series(text: str, kind: str) -> dict[tuple[str, str], float]:
    """``venturi_group_jobs`` of ``kind``: (group, status) -> value."""
    found = re.findall(
        rf'^venturi_group_jobs\{{group="([^"]*)",kind="{kind}",status="(\w+)"\}} (\S+)$',
        text,
        re.M,
    )
    return {(g, s): float(v) for g, s, v in found}


def groups_of(text: str, kind: str) -> float | None:
    m = re.search(rf'^venturi_groups\{{kind="{kind}"\}} (\S+)$', text, re.M)
    return None if m is None else float(m.group(1))


@pytest.fixture
def tasks(kinds: list[str]) -> tuple[venturi.Task[Item], venturi.Task[Item]]:
    @venturi.task(kind="export")
    async def export(ctx: Context[Any], carry: Item) -> None:
        return None

    @venturi.task(kind="mail")
    async def mail(ctx: Context[Any], carry: Item) -> None:
        return None

    return export, mail


async def test_twenty_groups_per_kind_have_series_and_the_set_follows_the_top(
    conn: asyncpg.Connection, tasks: tuple[venturi.Task[Item], venturi.Task[Item]]
) -> None:
    export, mail = tasks
    # Group gNN holds NN + 1 pending jobs: the top 20 are g05 to g24.
    await venturi.enqueue_many(
        conn, [export.job(Item(i), group=f"g{n:02}") for n in range(25) for i in range(n + 1)]
    )
    await venturi.enqueue_many(conn, [mail.job(Item(1)), mail.job(Item(2))])  # no group
    await gauges.refresh(conn, schema=S)
    text = exposition()
    assert groups_of(text, "export") == 25.0
    assert groups_of(text, "mail") == 0.0
    series = group_series(text, "export")
    assert {g for g, _ in series} == {f"g{n:02}" for n in range(5, 25)}
    assert len(series) == 40  # pending and claimed of each
    assert series[("g24", "pending")] == 25.0 and series[("g24", "claimed")] == 0.0
    assert not group_series(text, "mail")

    # g00 grows to the most pending, then every group has one job claimed (cap 1): g00
    # holds 40 pending, gNN NN; g05 leaves the top 20 and loses its series.
    await venturi.enqueue_many(conn, [export.job(Item(i), group="g00") for i in range(40)])
    claimed = 0
    while True:
        got, _ = await db.groups.claim_grouped(
            conn,
            schema=S,
            claimant=db.Claimant("w:1"),
            kind="export",
            lease=600.0,
            floor=0,
            limit=100,
            limits=db.groups.GroupLimits(1, None, None),
        )
        claimed += len(got.claimed)
        if not got.claimed and not got.woken:
            break
    assert claimed == 25
    await gauges.refresh(conn, schema=S)
    text = exposition()
    series = group_series(text, "export")
    assert len(series) == 40
    assert {g for g, _ in series} == {"g00"} | {f"g{n:02}" for n in range(6, 25)}
    assert ("g05", "pending") not in series and ("g05", "claimed") not in series
    assert series[("g00", "pending")] == 40.0 and series[("g00", "claimed")] == 1.0
    assert series[("g06", "pending")] == 6.0
    assert groups_of(text, "export") == 25.0
