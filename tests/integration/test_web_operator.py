"""The dashboard's operator features through HTTP (the ASGI app over a real database, as in
test_web.py): finding jobs (search, kind picker, totals, paging), acting on a selection,
recovering a gone worker, a kind's trends, and the comforts (theme, favicon, times with
their zone, the bare login page, trimmed tracebacks)."""

from __future__ import annotations

import html
import re

import asyncpg
import httpx

import venturi
import venturi.web
from tests.support.fleet import gone_worker
from tests.support.opsdata import S, make
from tests.support.web import CSRF, client, csrf_of
from venturi import admin, db, sql

ROW_IDS = re.compile(r'<tr data-id="(\d+)">')


def shown(page: str) -> list[int]:
    return [int(i) for i in ROW_IDS.findall(page)]


# --- finding jobs ---------------------------------------------------------------------


async def test_search_covers_kind_prefix_key_error_and_carry_with_the_status_filter(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    mail = await make(conn, "emails.send", "completed", carry='{"to": "ada@example.org"}')
    keyed = await make(conn, "billing.charge", "pending", key="invoice-2041")
    dead = await make(conn, "fetch", "dead", carry='{"url": "https://shop.test/cart"}')
    other = await make(conn, "fetch", "completed", carry='{"sku": "walnut"}')

    async def found(query: str) -> list[int]:
        r = await web.get("/jobs", params={"q": query})
        assert r.status_code == 200, r.text
        return sorted(shown(r.text))

    assert await found("emails") == [mail]  # a kind's prefix
    assert await found("emails.se") == [mail]
    assert await found("invoice-2041") == [keyed]  # the key
    assert await found("upstream refused") == [dead]  # words of the last error
    assert await found("walnut") == [other]  # a word of the carry
    assert await found("shop.test") == [dead]  # a host in the carry
    assert await found("ada@example.org") == [mail]
    assert await found("nowhere") == []
    # Combined with the status filter and the kind picker.
    r = await web.get("/jobs", params={"q": "fetch", "status": "dead"})
    assert shown(r.text) == [dead]
    r = await web.get("/jobs", params={"q": "walnut", "kind": "emails.send"})
    assert shown(r.text) == []
    picker = re.search(r'<select name="kind" id="kind-picker">(.*?)</select>', r.text, re.S)
    assert picker is not None
    assert re.findall(r'<option value="([^"]+)"', picker.group(1)) == [
        "billing.charge",
        "emails.send",
        "fetch",
    ]
    assert re.search(r"selected>emails.send<", picker.group(1))


async def test_totals_and_paging_forward_back_and_to_the_newest(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    await conn.execute(sql.statement("maintenance/jobs_seed_bulk"), 240, 3600.0)
    rows = await admin.list_jobs(conn, limit=500)
    ids = sorted((r.id for r in rows), reverse=True)
    r = await web.get("/jobs")
    assert re.search(r'id="totals">240 jobs match', r.text)
    first = shown(r.text)
    assert first == ids[:50] and 'id="page-newer"' not in r.text
    older = re.search(r'id="page-older" href="([^"]+)"', r.text)
    assert older is not None
    r = await web.get(html.unescape(older.group(1)))
    second = shown(r.text)
    assert second == ids[50:100]
    newer = re.search(r'id="page-newer" href="([^"]+)"', r.text)
    newest = re.search(r'id="page-newest" href="([^"]+)"', r.text)
    assert newer is not None and newest is not None
    assert shown((await web.get(html.unescape(newer.group(1)))).text) == ids[:50]
    assert shown((await web.get(html.unescape(newest.group(1)))).text) == ids[:50]
    # Back from the third page lands on the second, not the newest.
    third = await web.get(f"/jobs?before={ids[99]}")
    assert shown(third.text) == ids[100:150]
    back = re.search(r'id="page-newer" href="([^"]+)"', third.text)
    assert back is not None and shown((await web.get(html.unescape(back.group(1)))).text) == second
    # The last page has no "older"; totals follow the filter.
    last = await web.get(f"/jobs?before={ids[199]}")
    assert shown(last.text) == ids[200:] and 'id="page-older"' not in last.text
    dead = await web.get("/jobs?status=dead")
    n_dead = len([r for r in rows if r.status == "dead"])
    assert re.search(rf'id="totals">{n_dead} jobs match', dead.text)
    # Over the cap the total says "more than".
    assert admin.COUNT_CAP == 10_000


async def test_search_total_is_capped_and_the_search_is_a_bind_parameter(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    victim = await make(conn, "fetch", "dead", carry='{"note": "<img src=x onerror=alert(1)>"}')
    hostile = "'); DROP TABLE venturi.jobs; -- <script>alert(1)</script> \\ %_"
    r = await web.get("/jobs", params={"q": hostile})
    assert r.status_code == 200
    assert "<script>alert(1)</script>" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text  # echoed, escaped
    assert f'value="{html.escape(hostile)}"' in r.text or "&#39;); DROP TABLE" in r.text
    assert await venturi.get_job(conn, victim) is not None  # the table is still there
    # Found by a word of hostile markup, shown escaped.
    r = await web.get("/jobs", params={"q": "onerror"})
    assert shown(r.text) == [victim]
    page = (await web.get(f"/jobs/{victim}")).text
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    # The bulk confirmation counts the same search; an over-long search is refused.
    r = await web.get("/jobs/bulk", params={"action": "retry", "q": "onerror"})
    assert re.search(r'id="bulk-count"><strong>1</strong>', r.text)
    assert (await web.get("/jobs", params={"q": "x" * 201})).status_code == 400


# --- acting on some jobs ----------------------------------------------------------------


async def test_selected_rows_are_acted_on_journaled_and_the_page_redirects_back(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    a = await make(conn, "fetch", "dead")
    b = await make(conn, "fetch", "dead")
    untouched = await make(conn, "fetch", "dead")
    pending = await make(conn, "mail", "pending")
    token = await csrf_of(web, "/jobs")
    back = "/jobs?status=dead"
    r = await web.post(
        "/jobs/selected",
        data={"csrf": token, "back": back, "action": "retry", "ids": [str(a), str(b)]},
    )
    assert r.status_code == 303 and r.headers["location"] == back
    page = await web.get(back)
    assert "2 done, 0 refused" in page.text and 'id="flash"' in page.text
    assert "Retry: 2 selected job(s)" in page.text
    # Shown once: the next page has no flash.
    assert 'id="flash"' not in (await web.get(back)).text
    for job_id in (a, b):
        entry = (await venturi.get_journal(conn, job_id))[-1]
        assert (entry.event, entry.worker) == ("retried", "web:127.0.0.1")
    assert (await venturi.get_job(conn, untouched)).status == "dead"  # type: ignore[union-attr]
    # Refusals are reported, not hidden; every action of the list works on a selection.
    for name, job_id, expect in (
        ("run-now", pending, "already due"),
        ("cancel", pending, "pending -&gt; cancelled"),
        ("delete", untouched, "dead -&gt; deleted"),
    ):
        r = await web.post(
            "/jobs/selected",
            data={"csrf": token, "back": "/jobs", "action": name, "ids": [str(job_id)]},
            follow_redirects=True,
        )
        assert expect in r.text, name
    # Nothing ticked: said, nothing done. A foreign "back" is not followed.
    r = await web.post(
        "/jobs/selected",
        data={"csrf": token, "back": "https://evil.test/", "action": "retry"},
    )
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert "no job selected" in (await web.get("/")).text
    # No CSRF token: refused before anything is read.
    r = await web.post("/jobs/selected", data={"action": "delete", "ids": [str(a)]})
    assert r.status_code == 403 and await venturi.get_job(conn, a) is not None
    r = await web.post(
        "/jobs/selected", data={"csrf": token, "action": "delete", "ids": ["1; DROP"]}
    )
    assert r.status_code == 400


async def test_the_list_carries_checkboxes_and_a_selection_form(
    conn: asyncpg.Connection, pool: asyncpg.Pool, web: httpx.AsyncClient
) -> None:
    job_id = await make(conn, "fetch", "dead")
    r = await web.get("/jobs")
    assert f'<input type="checkbox" name="ids" value="{job_id}"' in r.text
    assert 'action="/jobs/selected"' in r.text and 'name="back" value="/jobs"' in r.text
    async with client(venturi.web.app(pool, read_only=True)) as ro:
        page = (await ro.get("/jobs")).text
        assert 'name="ids"' not in page and "/jobs/selected" not in page


# --- dead workers -----------------------------------------------------------------------


async def test_gone_worker_is_warned_of_and_recovered_from_the_pages(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    me = await gone_worker(conn, "crashed-host:7", {"fetch": 2, "mail": 1})
    r = await web.get("/")
    warning = re.search(r'id="gone-warning">(.*?)</div>', r.text, re.S)
    assert warning is not None
    text = re.sub(r"<[^>]+>", "", warning.group(1))
    assert "crashed-host:7" in text and "3 claims" in text
    assert "fetch 2" in text and "mail 1" in text
    claimed = [c.id for c in await admin.claimed_jobs(conn)]
    page = await web.get(f"/jobs/{claimed[0]}")
    assert 'id="holder-gone"' in page.text and 'action="/workers/recover"' in page.text
    workers = await web.get("/workers")
    assert 'action="/workers/recover"' in workers.text and str(me.token) in workers.text
    token = CSRF.search(workers.text).group(1)  # type: ignore[union-attr]
    r = await web.post(
        "/workers/recover",
        data={"csrf": token, "back": "/workers", "worker": str(me.token)},
    )
    assert r.status_code == 303 and r.headers["location"] == "/workers"
    after = await web.get("/workers")
    assert "3 done, 0 refused" in after.text and "claimed -&gt; pending" in after.text
    for job_id in claimed:
        job = await venturi.get_job(conn, job_id)
        assert job is not None and job.status == "pending" and job.failures == 1
        entry = (await venturi.get_journal(conn, job_id))[-1]
        assert (entry.event, entry.worker) == ("stale-recovered", "web:127.0.0.1")
    assert 'id="gone-warning"' not in (await web.get("/")).text


async def test_recovering_a_live_worker_is_refused_unless_forced(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    me = await gone_worker(conn, "busy-host:8", {"fetch": 1})
    await db.workers.worker_heartbeat(conn, schema=S, id=me.token)  # live again
    [job_id] = [c.id for c in await admin.claimed_jobs(conn)]
    token = await csrf_of(web, "/workers")
    form = {"csrf": token, "back": "/workers", "worker": str(me.token)}
    r = await web.post("/workers/recover", data=form, follow_redirects=True)
    assert "0 done, 1 refused" in r.text and "is live" in r.text
    assert (await venturi.get_job(conn, job_id)).status == "claimed"  # type: ignore[union-attr]
    r = await web.post("/workers/recover", data={**form, "force": "1"}, follow_redirects=True)
    assert "1 done, 0 refused" in r.text
    assert (await venturi.get_job(conn, job_id)).status == "pending"  # type: ignore[union-attr]


# --- trends -----------------------------------------------------------------------------


async def test_kind_page_charts_completed_failed_and_dead_over_a_period(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    await make(conn, "fetch", "completed")
    await make(conn, "fetch", "dead")
    await make(conn, "mail", "completed")
    for period, bars in (("1h", 60), ("24h", 72), ("7d", 84)):
        r = await web.get("/kind", params={"name": "fetch", "period": period})
        assert r.status_code == 200
        charts = re.findall(r'<figure class="chart (\w+)">(.*?)</figure>', r.text, re.S)
        assert [c for c, _ in charts] == ["done", "failed", "dead"]
        for _, body in charts:
            assert body.count('class="bar"') == bars
        totals = [int(t) for t in re.findall(r": (\d+) \(peak", r.text)]
        assert totals == [1, 1, 1], period  # mail's completion is not fetch's
        assert re.search(rf'data-period="{period}" class="current"', r.text)
    assert (await web.get("/kind", params={"name": "fetch", "period": "1y"})).status_code == 400
    assert (await web.get("/kind")).status_code == 400
    # The overview keeps its two charts; the kinds link to their page.
    r = await web.get("/")
    assert r.text.count("<svg") == 2 and 'href="/kind?name=fetch"' in r.text


# --- comfort ----------------------------------------------------------------------------


async def dead_with(conn: asyncpg.Connection, error: str) -> int:
    """A job that died with ``error`` as its traceback."""
    me = db.Claimant("w1:1")
    await make(conn, "trace", "pending")
    [row] = (
        await db.claims.job_claim(
            conn,
            schema=S,
            claimant=me,
            kinds=["trace"],
            leases=[60.0],
            floor=0,
            limit=1,
        )
    ).claimed
    status = await db.settle.job_fail_if_owned(
        conn,
        schema=S,
        claimant=me,
        job_id=row["id"],
        attempt=row["attempt"],
        event="failed",
        error=error,
        carry=None,
        delay=0.0,
        force_dead=True,
    )
    assert status == "dead"
    return int(row["id"])


async def test_theme_favicon_times_login_and_tracebacks(
    conn: asyncpg.Connection, pool: asyncpg.Pool, web: httpx.AsyncClient
) -> None:
    await make(conn, "fetch", "dead")
    r = await web.get("/jobs")
    assert '<html lang="en">' in r.text and 'id="theme-toggle"' in r.text
    web.cookies.set("venturi_theme", "dark")
    assert '<html lang="en" data-theme="dark">' in (await web.get("/jobs")).text
    web.cookies.set("venturi_theme", "<x>")
    assert '<html lang="en">' in (await web.get("/jobs")).text  # only light or dark
    assert 'rel="icon" type="image/svg+xml" href="/static/favicon.svg"' in r.text
    icon = await web.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.text.startswith("<svg")
    js = await web.get("/static/venturi.js")
    assert js.status_code == 200 and "prefers" not in r.text.split("<main>")[0]
    # Every relative time carries its absolute time, with the zone, on hover.
    titles = re.findall(r'<time datetime="[^"]+" title="([^"]+)">', r.text)
    assert titles and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", t) for t in titles)
    # A refresh control on live pages.
    assert 'id="refresh-interval"' in r.text and 'id="refresh-pause"' in r.text
    # The handler's traceback without venturi's frames on top.
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/srv/venturi/runtime/executor.py", line 56, in run_handler\n'
        "    result = await _chain(task, ctx, carry, middleware)\n"
        '  File "/srv/venturi/runtime/executor.py", line 96, in _chain\n'
        "    return await _call(task, ctx, carry)\n"
        '  File "/srv/venturi/runtime/executor.py", line 102, in _call\n'
        "    return await task.fn(ctx, carry)\n"
        '  File "/srv/app/tasks.py", line 9, in fetch\n'
        "    raise ValueError('kaput')\n"
        "ValueError: kaput\n"
    )
    dead = await dead_with(conn, frames)
    page = (await web.get(f"/jobs/{dead}")).text
    shown_tb = html.unescape(re.search(r'<pre class="traceback">(.*?)</pre>', page, re.S).group(1))  # type: ignore[union-attr]
    assert "executor.py" not in shown_tb and "[3 venturi frames hidden]" in shown_tb
    assert shown_tb.endswith("ValueError: kaput") and '"/srv/app/tasks.py", line 9' in shown_tb
    assert "executor.py" in (await venturi.get_job(conn, dead)).last_error  # type: ignore[union-attr,operator]
    # The login page: no navigation back into the dashboard.
    async with client(venturi.web.app(pool, token="t" * 32)) as anon:
        login = await anon.get("/login")
        assert login.status_code == 200 and "<nav>" not in login.text
        assert 'href="/jobs"' not in login.text and "Log out" not in login.text
