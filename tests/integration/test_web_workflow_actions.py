"""The dashboard's actions on workflows (issue 40), through HTTP over a real database and
a real worker (``venturi.testing.drain``): each action says what it will do before it
does it; a job waiting for a signal offers Send signal (CSRF and token as every other
action, journaled with the operator) and, with a timeout, Time out the signal now, never
a plain Run now; a cancelled parent's retry offers its children along."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import asyncpg
import httpx

import venturi
import venturi.testing
import venturi.web
from tests.support import Item
from tests.support.flows import Flows, run_flows
from tests.support.web import CSRF
from venturi import Context, admin

TOKEN = "t0ken-for-the-workflow-action-tests-0123"


async def post(c: httpx.AsyncClient, path: str, data: dict[str, Any], back: str) -> httpx.Response:
    page = await c.get(back)
    m = CSRF.search(page.text)
    assert m, "no CSRF field on the page"
    r = await c.post(path, data={"csrf": m.group(1), "back": back, **data})
    if r.status_code != 303:
        return r
    return await c.get(r.headers["location"])


def has(page: str, ident: str) -> bool:
    return f'id="{ident}"' in page


async def test_a_signal_wait_offers_send_signal_and_no_run_now(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], web: httpx.AsyncClient
) -> None:
    flows: Flows = await run_flows(dsn, conn)
    back = f"/jobs/{flows.approver}"
    page = (await web.get(back)).text
    assert has(page, "send-signal") and not has(page, "run-now")
    assert not has(page, "timeout-now")  # its wait has no timeout
    # A timer's page says what Run now does before it does it.
    sleeper = (await web.get(f"/jobs/{flows.sleeper}")).text
    assert has(sleeper, "run-now") and "Wakes its timer now" in sleeper
    assert not has(sleeper, "send-signal")
    # Refused: no CSRF token, a payload that is not JSON.
    r = await web.post(f"{back}/signal", data={"name": "approval", "back": back})
    assert r.status_code == 403
    r = await post(web, f"{back}/signal", {"name": "approval", "payload": "{no"}, back)
    assert r.status_code == 400 and "the payload is not JSON" in r.text
    assert (await venturi.get_job(conn, flows.approver)).status == "waiting"  # type: ignore[union-attr]
    r = await post(web, f"{back}/signal", {"name": "approval", "payload": '"maria"'}, back)
    assert r.status_code == 200
    assert "signal &#39;approval&#39; sent, waiting -&gt; pending" in r.text
    [woken] = [e for e in await venturi.get_journal(conn, flows.approver) if e.event == "woken"]
    assert (woken.worker, woken.detail) == ("web:127.0.0.1", "signal approval sent by an operator")
    r = await post(web, f"{back}/signal", {"name": "approval", "payload": '"bo"'}, back)
    assert "the first of a name wins" in r.text


async def test_time_out_the_signal_now_fires_its_timeout_only_from_its_own_button(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], web: httpx.AsyncClient
) -> None:
    @venturi.task(kind="wfa_timed", result=str)
    async def timed(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        try:
            await ctx.wait_for_signal("approval", str, timeout=timedelta(days=2))
        except venturi.SignalTimeout:
            return venturi.complete("timed out")
        return venturi.complete("approved")

    job_id = await timed.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [timed], timers=False)
    back = f"/jobs/{job_id}"
    page = (await web.get(back)).text
    assert has(page, "send-signal") and has(page, "timeout-now") and not has(page, "run-now")
    assert "the wait raises SignalTimeout in the handler" in page
    # A hand-made run-now post (no timeout_now) is refused, saying what to do instead.
    r = await post(web, f"{back}/run-now", {}, back)
    assert "run-now does not time it out" in r.text
    r = await post(web, f"{back}/run-now", {"timeout_now": "1"}, back)
    assert "Time out the signal of job" in r.text and "fired now" in r.text
    await venturi.testing.drain(dsn, [timed], timers=False)
    assert await venturi.get_result(conn, job_id) == "timed out"


async def test_a_cancelled_parents_retry_offers_its_children_along(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], web: httpx.AsyncClient
) -> None:
    @venturi.task(kind="wfa_child", result=int)
    async def child(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfa_parent")
    async def parent(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kids = [await ctx.spawn(f"c{i}", child, Item(i + 1)) for i in range(2)]
        return venturi.complete(sum(await ctx.gather(*kids)))

    job_id = await parent.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [parent], timers=False)  # the children wait unserved
    [change] = await admin.cancel_jobs(conn, [job_id], operator="op")
    assert change.done
    back = f"/jobs/{job_id}"
    page = (await web.get(back)).text
    assert "Retry with its dead or cancelled children" in page
    r = await post(web, f"{back}/retry", {"with_children": "1"}, back)
    assert r.text.count("cancelled -&gt; pending") == 3
    await venturi.testing.drain(dsn, [parent, child], timers=False)
    assert await venturi.get_result(conn, job_id) == 3


async def test_pages_say_a_kind_is_paused_and_show_no_deadline_step(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], web: httpx.AsyncClient
) -> None:
    @venturi.task(kind="wfa_held", result=int)
    async def held(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        return venturi.complete(carry.n)

    @venturi.task(kind="wfa_waiter")
    async def waiter(ctx: Context[Any], carry: Item) -> venturi.Outcome:
        kid = await ctx.spawn("held", held, Item(1))
        await ctx.wait_for_signal("go", str, timeout=timedelta(days=1))
        return venturi.complete(await ctx.gather(kid))

    await admin.pause_kinds(conn, ["wfa_held"], operator="op")
    job_id = await waiter.enqueue(conn, Item(1))
    await venturi.testing.drain(dsn, [waiter], timers=False)
    page = (await web.get(f"/jobs/{job_id}")).text
    # A signal wait with a timeout: the deadline is the wait's, never a step.
    assert 'id="waiting-signal"' in page and "(its timeout)" in page
    assert re.findall(r'data-step="([^"]+)"', page) == ["held"]
    assert "\x1f" not in page and "go&#31;" not in page
    assert await venturi.signal(conn, job_id, "go", "now")
    await venturi.testing.drain(dsn, [waiter], timers=False)
    page = (await web.get(f"/jobs/{job_id}")).text
    paused = re.search(r'id="waiting-paused"[^>]*>(.*?)</li>', page, re.S)
    assert paused is not None and "wfa_held" in paused.group(1)
    assert "not claimed until resumed" in paused.group(1)
    assert not has(page, "kind-paused")  # its own kind runs
    detail = await admin.show_job(conn, job_id)
    assert detail is not None
    child = (await web.get(f"/jobs/{detail.children[0].id}")).text
    assert has(child, "kind-paused") and "is paused:" in child
