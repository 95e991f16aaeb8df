"""The web dashboard at request level: the ASGI app over a real database through httpx's
ASGI transport (no server, no mocks): pages, the JSON API against the command line's
--json, pagination, actions with their journal, the command, the registry of workers.
The security rules have their own module (tests/integration/test_web_security.py)."""

from __future__ import annotations

import asyncio
import html
import json
import re
import sys
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

import venturi
import venturi.testing
import venturi.web
from tests.support.opsdata import S, make
from tests.support.web import TOKEN, post, run_web, serving, status
from venturi import JobSpec, admin, db, sql


async def cli_json(dsn: str, *args: str) -> Any:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        *args,
        "--json",
        "--dsn",
        dsn,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


# --- pages ----------------------------------------------------------------------------


async def test_every_page_renders_the_seeded_state(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    done = await make(conn, "mail", "completed")
    claimed = await make(conn, "mail", "claimed", worker="host-a:41")
    dead = await make(conn, "fetch", "dead", carry='{"url": "https://x.test"}')
    await make(conn, "fetch", "scheduled")
    await db.kinds.kind_pause(
        conn, schema=S, kinds=["fetch"], paused_by="operator:test", reason="upstream down"
    )

    r = await web.get("/")
    assert r.status_code == 200
    row = re.search(r'<tr data-kind="fetch">(.*?)</tr>', r.text, re.S)
    assert row and "paused" in row.group(1)
    assert 'class="dead-count"' in row.group(1) and ">1</a>" in row.group(1)
    assert r.text.count("<svg") == 2 and 'class="bar"' in r.text
    assert 'data-refresh="/partials/overview"' in r.text and 'id="refresh-control"' in r.text
    live = await web.get("/partials/overview")
    assert live.status_code == 200 and live.text.lstrip().startswith('<section id="live"')

    r = await web.get("/jobs")
    assert all(f'href="/jobs/{i}"' in r.text for i in (done, claimed, dead))
    r = await web.get(f"/jobs/{dead}")
    assert "ConnectionError: upstream refused" in r.text
    assert '<pre class="traceback">' in r.text and "https://x.test" in r.text
    assert f'action="/jobs/{dead}/retry"' in r.text
    r = await web.get(f"/jobs/{claimed}")
    assert "held by" in r.text and "host-a:41" in r.text
    assert f'action="/jobs/{claimed}/delete"' not in r.text  # cancel it first

    r = await web.get("/kinds")
    assert "upstream down" in r.text and "Resume" in r.text
    r = await web.get("/workers")
    assert "host-a:41" in r.text and f'href="/jobs/{claimed}"' in r.text
    assert (await web.get("/jobs/999999")).status_code == 404
    assert (await web.get("/jobs?status=done")).status_code == 400
    assert (await web.get("/jobs?before=abc")).status_code == 400


async def test_a_failure_of_many_lines_is_listed_whole_on_one_line(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    # The jobs list's note read a traceback's last line: an exception whose message spans
    # lines (pydantic's, asyncpg's) showed its last line alone, without its type.
    error = (
        "Traceback (most recent call last):\n"
        '  File "app.py", line 9, in export\n'
        "    raise ValueError(msg)\n"
        "ValueError: 1 validation error for Order\n"
        "quantity\n"
        "  Input should be greater than 0\n"
    )
    await make(conn, "export", "dead", error=error)
    page = html.unescape((await web.get("/jobs?status=dead")).text)
    [note] = re.findall(r'<td class="note">(.*?)</td>', page, re.S)
    assert (
        note == "ValueError: 1 validation error for Order quantity Input should be greater than 0"
    )


async def test_schedules_page_shows_next_slots(
    conn: asyncpg.Connection, web: httpx.AsyncClient, kinds: list[str]
) -> None:
    @venturi.task(kind="w_nightly", cron="30 2 * * *", tz="Europe/Paris")
    async def nightly(ctx: venturi.Context[None], carry: None) -> None:
        pass

    r = await web.get("/schedules")
    assert r.status_code == 200
    assert "w_nightly" in r.text and "30 2 * * *" in r.text and "Europe/Paris" in r.text
    assert r.text.count("<time datetime=") == 5


async def test_keyset_pagination_walks_every_job_once(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    specs = [JobSpec(f"k{i % 3}", "{}", 1, None, None, f"key-{i}", 25) for i in range(130)]
    ids = await db.enqueue.job_insert_many(conn, schema=S, specs=specs)
    seen: list[int] = []
    path: str | None = "/jobs?kind=k1"
    while path:
        r = await web.get(path)
        seen += [int(i) for i in re.findall(r'<td class="num"><a href="/jobs/(\d+)">', r.text)]
        m = re.search(r'rel="next" href="([^"]+)"', r.text)
        path = m.group(1).replace("&amp;", "&") if m else None
    k1 = [i for n, i in enumerate(ids) if n % 3 == 1]
    assert seen == sorted(k1, reverse=True)
    r = await web.get("/jobs?key=key-7")
    assert re.findall(r'href="/jobs/(\d+)"', r.text) == [str(ids[7])]


# --- the JSON API is the command line's --json -----------------------------------------


async def test_api_answers_what_the_cli_prints(
    dsn: str, conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    await make(conn, "mail", "completed")
    dead = await make(conn, "fetch", "dead")
    await make(conn, "mail", "claimed", worker="host-b:7")
    await make(conn, "mail", "pending")

    r = await web.get("/api/jobs?status=dead&kind=fetch")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == await cli_json(dsn, "jobs", "list", "--status", "dead", "--kind", "fetch")
    assert (await web.get("/api/jobs")).json() == await cli_json(dsn, "jobs", "list")
    shown = (await web.get(f"/api/jobs/{dead}")).json()
    assert shown == await cli_json(dsn, "jobs", "show", str(dead))
    stats, printed = (await web.get("/api/stats")).json(), await cli_json(dsn, "stats")
    # The oldest due job's wait grows between the two reads; everything else is equal.
    for doc in (stats, printed):
        for k in doc["kinds"]:
            assert k.pop("oldest_due_seconds") is None or k["due"] > 0
    assert stats == printed
    workers = (await web.get("/api/workers")).json()
    assert [(w["name"], w["state"]) for w in workers] == [("host-b:7", "unregistered")]
    assert workers == await cli_json(dsn, "workers")
    missing = await web.get("/api/jobs/424242")
    assert missing.status_code == 404 and "does not exist" in missing.json()["error"]
    assert (await web.get("/api/jobs?limit=0")).status_code == 400


async def test_api_shows_a_workflow_as_the_cli_does_and_the_overview_counts_waiting(
    dsn: str, conn: asyncpg.Connection, web: httpx.AsyncClient, kinds: list[str]
) -> None:
    @venturi.task(kind="web_gate")
    async def gate(ctx: venturi.Context[None], carry: None) -> venturi.Outcome:
        return venturi.complete(await ctx.wait_for_signal("go", str))

    @venturi.task(kind="web_flow")
    async def flow(ctx: venturi.Context[None], carry: None) -> venturi.Outcome:
        return venturi.complete(await ctx.gather(await ctx.spawn("gate", gate, None)))

    job_id = await flow.enqueue(conn, None)
    await venturi.testing.drain(dsn, [flow, gate])
    shown = (await web.get(f"/api/jobs/{job_id}")).json()
    assert shown == await cli_json(dsn, "jobs", "show", str(job_id))
    [child] = shown["children"]
    assert (child["kind"], child["status"]) == ("web_gate", "waiting")
    assert shown["waiting_for"]["jobs"] == [child["id"]]
    assert (await web.get(f"/api/jobs/{child['id']}")).json()["parent_id"] == job_id
    stats = (await web.get("/api/stats")).json()
    assert {k["kind"]: k["waiting"] for k in stats["kinds"]} == {"web_flow": 1, "web_gate": 1}
    page = (await web.get("/")).text
    assert '<th class="num">waiting</th>' in page
    assert "status=waiting" in page


# --- actions --------------------------------------------------------------------------


async def test_single_job_actions_are_journaled_with_the_operator(
    dsn: str, conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    dead = await make(conn, "fetch", "dead")
    claimed = await make(conn, "mail", "claimed")
    scheduled = await make(conn, "mail", "scheduled")
    due = await make(conn, "mail", "pending")

    r = await post(web, f"/jobs/{dead}/retry", {})
    assert r.status_code == 200 and "dead -&gt; pending" in r.text
    entry = (await venturi.get_journal(conn, dead))[-1]
    assert (entry.event, entry.worker, entry.detail) == ("retried", "web:127.0.0.1", "manual retry")

    r = await post(web, f"/jobs/{claimed}/delete", {})
    assert "cancel it first" in r.text and await status(conn, claimed) == "claimed"
    r = await post(web, f"/jobs/{claimed}/cancel", {})
    assert "cancel requested" in r.text
    assert (await venturi.get_job(conn, claimed)).cancel_requested_at is not None  # type: ignore[union-attr]

    listener = await asyncpg.connect(dsn)
    woken: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(sql.channel(S), lambda *a: woken.put_nowait(a[3]))
    try:
        r = await post(web, f"/jobs/{scheduled}/run-now", {})
        assert "visible now" in r.text
        assert await asyncio.wait_for(woken.get(), 10) == "mail"
    finally:
        await listener.close()
    job = await venturi.get_job(conn, scheduled)
    assert job is not None and job.visible_at <= datetime.now(UTC)
    entry = (await venturi.get_journal(conn, scheduled))[-1]
    assert (entry.event, entry.worker, entry.detail) == ("released", "web:127.0.0.1", "run now")
    r = await post(web, f"/jobs/{due}/run-now", {})
    assert "already due" in r.text

    r = await post(web, f"/jobs/{due}/delete", {})
    assert "pending -&gt; deleted" in r.text and await status(conn, due) is None
    assert (await post(web, f"/jobs/{due}/explode", {})).status_code == 400


async def test_bulk_action_confirms_the_count_and_spares_newer_jobs(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    deads = [await make(conn, "fetch", "dead") for _ in range(3)]
    other = await make(conn, "mail", "dead")
    r = await web.get("/jobs/bulk?action=retry&status=dead&kind=fetch")
    assert r.status_code == 200
    assert re.search(r'id="bulk-count"><strong>3</strong>', r.text)
    form = {k: html.unescape(v) for k, v in re.findall(r'name="(\w+)" value="([^"]*)"', r.text)}
    assert form["up_to"] == str(deads[-1]) and form["action"] == "retry"
    late = await make(conn, "fetch", "dead")  # after the confirmation: left alone
    r = await web.post("/jobs/bulk", data=form)
    assert r.status_code == 303 and r.headers["location"] == "/jobs?status=dead&kind=fetch"
    r = await web.get(r.headers["location"])
    assert r.status_code == 200 and "3 done, 0 refused" in r.text
    assert [await status(conn, i) for i in deads] == ["pending"] * 3
    assert await status(conn, late) == "dead" and await status(conn, other) == "dead"
    # Delete on a filter that holds a claimed job: that one is refused, the rest go.
    await make(conn, "sweep", "claimed")
    await make(conn, "sweep", "completed")
    r = await web.get("/jobs/bulk?action=delete&kind=sweep")
    form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', r.text))
    r = await web.post("/jobs/bulk", data=form, follow_redirects=True)
    assert "1 done, 1 refused" in r.text
    assert [j.status for j in await admin.list_jobs(conn, kind="sweep")] == ["claimed"]


async def test_pause_and_resume_a_kind(conn: asyncpg.Connection, web: httpx.AsyncClient) -> None:
    await make(conn, "mail", "pending")
    r = await post(web, "/kinds/pause", {"kind": "mail", "reason": "smtp down"})
    assert r.status_code == 200
    [row] = await db.kinds.kind_paused_list(conn, schema=S)
    assert (row["kind"], row["paused_by"], row["reason"]) == ("mail", "web:127.0.0.1", "smtp down")
    r = await post(web, "/kinds/resume", {"kind": "mail"})
    assert "resumed mail" in r.text and await db.kinds.kind_paused_list(conn, schema=S) == []


async def test_a_nul_character_in_a_filter_or_a_form_is_bad_input(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    # PostgreSQL's text cannot hold one: the filter reached the database, which refused
    # it, and the dashboard answered 503, "database error: invalid byte sequence".
    for path in ("/jobs?kind=%00", "/kind?name=%00", "/jobs?q=a%00", "/api/groups?kind=%00"):
        r = await web.get(path)
        assert r.status_code == 400 and "holds a NUL character" in r.text, (path, r.text)
    r = await post(web, "/kinds/pause", {"kind": "mail\x00", "reason": "x"})
    assert r.status_code == 400 and "kind holds a NUL character" in r.text
    assert await db.kinds.kind_paused_list(conn, schema=S) == []


# --- the command ----------------------------------------------------------------------


async def test_venturi_web_refuses_a_public_host_without_a_token(dsn: str, tmp_path: Any) -> None:
    code, err = await run_web("--dsn", dsn, "--host", "0.0.0.0", env={"VENTURI_WEB_TOKEN": ""})
    assert code == 2 and err.strip().count("\n") == 0
    assert "refusing to serve 0.0.0.0 without a token" in err
    empty = tmp_path / "token"
    empty.write_text("\n")
    code, err = await run_web("--dsn", dsn, "--token-file", str(empty))
    assert code == 2 and "is empty" in err
    code, err = await run_web("--dsn", dsn, "--token-file", str(tmp_path / "missing"))
    assert code == 2 and "cannot read" in err


async def test_venturi_web_serves_with_a_token(dsn: str, tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    async with serving(dsn, "--token-file", str(token_file), "--read-only") as base:
        async with httpx.AsyncClient(base_url=base) as c:
            r = await c.get("/api/stats", headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200 and r.json()["kinds"] == []
            assert (await c.get("/api/stats")).status_code == 401


async def test_delete_and_run_now_functions_report_each_job(conn: asyncpg.Connection) -> None:
    # The statements behind the dashboard's delete and run-now, for the command line too.
    claimed = await make(conn, "mail", "claimed")
    done = await make(conn, "mail", "completed")
    scheduled = await make(conn, "mail", "scheduled")
    changes = await admin.delete_jobs(conn, [done, claimed, 999_999, done], operator="me")
    assert [(c.id, c.done) for c in changes] == [(claimed, False), (done, True), (999_999, False)]
    assert "does not exist" in changes[2].message and await status(conn, done) is None
    assert await venturi.get_journal(conn, done) == []  # the journal went with it
    changes = await admin.run_now_jobs(conn, [scheduled, claimed], operator="me")
    assert [(c.id, c.done) for c in changes] == [(claimed, False), (scheduled, True)]
    assert "only pending or waiting jobs" in changes[0].message
    with pytest.raises(venturi.ConfigError, match="positive integers"):
        await admin.delete_jobs(conn, [0])
    matching = await admin.count_matching(conn, kind="mail")
    assert matching == admin.Matching(2, scheduled)


# --- the registry of workers ------------------------------------------------------------


async def test_workers_page_shows_the_registry_and_flags_kinds_without_a_worker(
    dsn: str, conn: asyncpg.Connection, web: httpx.AsyncClient, kinds: list[str]
) -> None:
    from tests.support import running, wait_stat, wait_status
    from tests.support.fleet import silence_worker
    from venturi.runtime.worker import Worker

    started = asyncio.Event()

    @venturi.task(kind="wr_hold")
    async def hold(ctx: venturi.Context[None], carry: None) -> None:
        started.set()
        await ctx.cancelled()

    @venturi.task(kind="wr_idle")
    async def idle(ctx: venturi.Context[None], carry: None) -> None:
        pass

    @venturi.task(kind="wr_orphan")
    async def orphan(ctx: venturi.Context[None], carry: None) -> None:
        pass

    held = await hold.enqueue(conn, None)
    await orphan.enqueue(conn, None)
    busy = Worker(None, dsn, [hold], poll_max=0.2, claimed_by="busy-one", shutdown_timeout=5)
    # No heartbeat within the test: once silenced, it stays gone.
    lazy = Worker(None, dsn, [idle], poll_max=0.2, claimed_by="idle-one", heartbeat=3600)
    async with running(busy), running(lazy):
        await asyncio.wait_for(started.wait(), 30)
        await wait_stat(lazy, "empty_claims", 1)
        [gone] = [w for w in await admin.list_workers(conn) if w.name == "idle-one"]
        await silence_worker(conn, gone.id, 3600)
        r = await web.get("/workers")
        assert r.status_code == 200
        rows = re.findall(r'<tr data-state="(\w+)">\s*<td class="worker">([^<]+)', r.text)
        assert sorted((name.strip(), state) for state, name in rows) == [
            ("busy-one", "live"),
            ("idle-one", "gone"),
        ]
        assert f'href="/jobs/{held}"' in r.text  # the claim it holds, linked
        api = (await web.get("/api/workers")).json()
        assert {w["name"]: (w["state"], w["claims"]) for w in api} == {
            "busy-one": ("live", 1),
            "idle-one": ("gone", 0),
        }
        page = await web.get("/")
        orphan_row = next(
            line for line in page.text.split("<tr") if 'data-kind="wr_orphan"' in line
        )
        assert "no live worker" in orphan_row
        hold_row = next(line for line in page.text.split("<tr") if 'data-kind="wr_hold"' in line)
        assert "no live worker" not in hold_row
    await wait_status(conn, held, "completed")  # its handler returned when asked to stop
