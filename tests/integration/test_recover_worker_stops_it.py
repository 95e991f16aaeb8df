"""`venturi recover --worker` marks the worker it recovered stopped, so that the
``venturi_queue_workers{state="gone"}`` alert docs/metrics.md advises clears once its
claims are returned; a worker recovered while it was alive after all (``--force``, or a
network that comes back) is marked running again by its next heartbeat."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

import venturi
from tests.support import running, wait_for, wait_status
from tests.support.fleet import gone_worker
from venturi import Context, admin
from venturi.maintenance import gauges
from venturi.runtime.worker import Worker


async def _state(conn: asyncpg.Connection, token: Any) -> admin.WorkerInfo:
    [found] = [w for w in await admin.list_workers(conn) if w.id == token]
    return found


async def test_a_recovered_gone_worker_is_stopped_and_no_longer_gone(
    conn: asyncpg.Connection,
) -> None:
    me = await gone_worker(conn, "w_gone", {"r_kind": 2})
    assert (await gauges.refresh(conn, schema="venturi")).gone == 1
    heard = (await _state(conn, me.token)).heartbeat_at
    done = await admin.recover_worker(conn, str(me.token))
    assert len(done.jobs) == 2
    # It stayed gone for a day (until pruned) after its claims were returned.
    assert (await gauges.refresh(conn, schema="venturi")).gone == 0
    after = await _state(conn, me.token)
    assert after.state == "stopped" and after.claims == 0
    assert after.heartbeat_at == heard  # when it was last heard of, kept


async def test_a_live_worker_recovered_with_force_beats_on_as_live(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    @venturi.task(kind="r_live")
    async def hold(ctx: Context[Any], carry: int) -> None:
        if carry == 1:
            started.set()
            await release.wait()

    first = await hold.enqueue(conn, 1)
    w = Worker(None, dsn, [hold], poll_max=0.2, heartbeat=0.1)
    async with running(w):
        await asyncio.wait_for(started.wait(), 30)
        [token] = [x.id for x in await admin.list_workers(conn) if x.state == "live"]
        done = await admin.recover_worker(conn, str(token), force=True)
        assert [c.id for c in done.jobs] == [first]

        async def live() -> bool:
            return (await _state(conn, token)).state == "live"

        # Its heartbeat is not broken: the next beat says it runs, and it claims on.
        await wait_for(live, within=30)
        release.set()
        second = await hold.enqueue(conn, 2)
        await wait_status(conn, second, "completed")
    assert (await _state(conn, token)).state == "stopped"  # its own clean stop


async def test_a_worker_name_with_a_nul_is_refused_before_any_statement(
    conn: asyncpg.Connection,
) -> None:
    import pytest

    # The driver's CharacterNotInRepertoireError before (cli probe).
    with pytest.raises(venturi.ConfigError, match="worker must be a string without NUL"):
        await admin.recover_worker(conn, "a\x00b")
