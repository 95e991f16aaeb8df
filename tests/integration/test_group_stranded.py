"""The workers' look for groups left out of the grouped claim (``group_wake_stranded``,
run by the recovery timer): a group with a job visible now that is neither ready,
paused, nor due a wake-up is woken and reported; a queue in any state the claim leaves
has none (docs/groups.md, "Why no grouped job is left behind")."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

import venturi
from tests.integration.test_groups import claim, claim_all, finish
from tests.support import Item
from tests.support import sql as test_sql
from venturi import Context
from venturi.backoff import DEFAULT_BACKOFF
from venturi.runtime.instruments import Instruments
from venturi.runtime.recovery import Recovery


@pytest.fixture
def grouped(kinds: list[str]) -> venturi.Task[Item]:
    @venturi.task(kind="stranded", group_cap=1)
    async def handler(ctx: Context[Any], carry: Item) -> None:
        return None

    return handler


def _recovery() -> Recovery:
    return Recovery("venturi", "test:1", DEFAULT_BACKOFF, Instruments(False), every=1.0)


async def test_a_group_left_out_of_the_claim_is_woken_and_reported(
    conn: asyncpg.Connection, grouped: venturi.Task[Item], caplog: pytest.LogCaptureFixture
) -> None:
    recovery = _recovery()
    # Every state the claim leaves: groups parked (drained), at their cap with work
    # (ready), paused with work, with only a job scheduled later, and a new group whose
    # wake-up no claim has applied yet. None is stranded.
    await venturi.enqueue_many(conn, [grouped.job(Item(i), group=g) for i, g in enumerate("ab")])
    await finish(conn, await claim_all(conn, "stranded", cap=1))
    assert await claim_all(conn, "stranded", cap=1) == []  # a and b parked
    await venturi.set_group(conn, "stranded", "paused", paused=True)
    ids = await venturi.enqueue_many(
        conn,
        [
            grouped.job(Item(10), group="a"),
            grouped.job(Item(11), group="a"),  # a at its cap after the claim below
            grouped.job(Item(12), group="b", after=3600),
            grouped.job(Item(13), group="paused"),
        ],
    )
    first = await claim_all(conn, "stranded", cap=1)
    assert [r["grp"] for r in first] == ["a"]
    await grouped.enqueue(conn, Item(14), group="new")
    assert await recovery.wake_stranded(conn) == 0
    assert recovery.stats["groups_stranded"] == 0

    # A bug strands group "a": its first job done, its second pending, the group parked
    # with no wake-up.
    await finish(conn, first)
    await conn.execute(test_sql.statement("group_strand"), "stranded", "a")
    # Claims pass it by for good (they take only "new"'s job).
    assert [r["grp"] for r in await claim_all(conn, "stranded", cap=1)] == ["new"]
    with caplog.at_level(logging.WARNING, logger="venturi.recovery"):
        assert await recovery.wake_stranded(conn) == 1
    assert recovery.stats["groups_stranded"] == 1
    # The warning names the group, its job left behind (the second of this batch's "a":
    # the first ran) and the group's row as the look found it (two claims counted, one
    # from each batch; head tier 1).
    messages = [r.getMessage() for r in caplog.records]
    (warning,) = [m for m in messages if "group a of stranded" in m]
    assert f"job {ids[1]} visible since" in warning
    assert "claims 2, head 1" in warning
    # Woken: the next claims take its job; nothing is stranded any more.
    assert [r["grp"] for r in await claim_all(conn, "stranded", cap=1)] == ["a"]
    assert await recovery.wake_stranded(conn) == 0


async def test_a_claim_whose_transaction_began_before_the_job_leaves_no_group_behind(
    conn: asyncpg.Connection, dsn: str, grouped: venturi.Task[Item]
) -> None:
    """The stranding the long chaos run found (docs/chaos.md): claim P's transaction began
    before job J was enqueued, and its snapshot came after another claim applied J's
    wake-up without taking J. By `now()`, P's clock, J was not visible yet: P found the
    group without work, parked it, and J was left with no wake-up. A claim in a
    transaction that first waits on the kind's cap lock opens that gap on every claim;
    in the chaos run it was the statement's planning, between its transaction's start
    and its snapshot. The claim now reads its clock after its snapshot."""
    (first,) = await venturi.enqueue_many(conn, [grouped.job(Item(0), group="g")])
    assert (await claim(conn, "stranded", limit=0)).woken == 1  # the group made ready
    other = await asyncpg.connect(dsn)
    try:
        async with other.transaction():
            # P's transaction begins here (its first statement): its now() is fixed.
            await other.fetchval(test_sql.statement("clock_now"))
            (late,) = await venturi.enqueue_many(conn, [grouped.job(Item(1), group="g")])
            # Another claim takes the first job and applies the late one's wake-up.
            assert [r["id"] for r in (await claim(conn, "stranded", limit=1)).claimed] == [first]
            took = (await claim(other, "stranded", limit=5)).claimed
        assert [r["id"] for r in took] == [late]
    finally:
        await other.close()
    assert await _recovery().wake_stranded(conn) == 0
