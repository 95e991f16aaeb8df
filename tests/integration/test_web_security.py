"""The web dashboard's security rules at request level (the ASGI app over a real database
through httpx's ASGI transport, as tests/integration/test_web.py): the token, CSRF,
read-only, escaping of hostile values, a mount under a prefix, a database without the
schema."""

from __future__ import annotations

import json
import re
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import venturi
import venturi.testing
import venturi.web
from tests.support.claims import claim
from tests.support.opsdata import TRACEBACK, S, make
from tests.support.web import CSRF, TOKEN, client, csrf_of, post, status
from venturi import JobSpec, db

# --- security -------------------------------------------------------------------------


async def test_with_a_token_every_request_needs_it(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    dead = await make(conn, "fetch", "dead")
    app = venturi.web.app(pool, token=TOKEN)
    async with client(app) as anon:
        r = await anon.get(f"/jobs/{dead}")
        assert r.status_code == 303 and r.headers["location"] == f"/login?next=%2Fjobs%2F{dead}"
        for path in ("/api/jobs", f"/api/jobs/{dead}", "/api/stats", "/api/workers"):
            r = await anon.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        wrong = await anon.get("/api/jobs", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        # A POST without the token changes nothing, CSRF token or not.
        login_csrf = await csrf_of(anon, "/login")
        r = await anon.post(f"/jobs/{dead}/retry", data={"csrf": login_csrf})
        assert r.status_code == 401 and await status(conn, dead) == "dead"
        r = await anon.get("/api/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and r.json()[0]["id"] == dead
        # The login form: a wrong token is refused, the right one sets the cookie.
        r = await anon.post("/login", data={"csrf": login_csrf, "token": "guess", "next": "/"})
        assert r.status_code == 401 and "not the dashboard" in r.text
        r = await anon.post("/login", data={"token": TOKEN, "next": "/"})  # no CSRF token
        assert r.status_code == 403
        r = await anon.post(
            "/login", data={"csrf": login_csrf, "token": TOKEN, "next": "https://evil.test/"}
        )
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert "venturi_session=" in cookie and TOKEN not in cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert (await anon.get(f"/jobs/{dead}")).status_code == 200
        assert (await anon.get("/api/stats")).status_code == 200
        r = await post(anon, f"/jobs/{dead}/retry", {})
        assert r.status_code == 200 and await status(conn, dead) == "pending"


async def test_actions_need_this_browsers_csrf_token(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    dead = await make(conn, "fetch", "dead")
    pending = await make(conn, "mail", "pending")
    app = venturi.web.app(pool)
    async with client(app) as browser, client(app) as other:
        mine = await csrf_of(browser, "/")
        theirs = await csrf_of(other, "/")
        for data in ({}, {"csrf": ""}, {"csrf": "0" * 64}, {"csrf": theirs}):
            for path in (
                f"/jobs/{dead}/retry",
                f"/jobs/{dead}/delete",
                f"/jobs/{pending}/cancel",
                "/kinds/pause",
            ):
                r = await browser.post(path, data={**data, "kind": "mail"})
                assert r.status_code == 403, (path, data)
            r = await browser.post(
                "/jobs/bulk", data={**data, "action": "delete", "up_to": str(pending)}
            )
            assert r.status_code == 403
        # The same token without this browser's nonce cookie is refused too.
        async with client(app) as stranger:
            r = await stranger.post(f"/jobs/{dead}/retry", data={"csrf": mine})
            assert r.status_code == 403
    assert await status(conn, dead) == "dead" and await status(conn, pending) == "pending"
    assert await db.kinds.kind_paused_list(conn, schema=S) == []
    assert [e.event for e in await venturi.get_journal(conn, dead)][-1] == "dead"


async def test_read_only_refuses_every_action(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    dead = await make(conn, "fetch", "dead")
    async with client(venturi.web.app(pool, read_only=True)) as c:
        page = await c.get(f"/jobs/{dead}")
        assert "read-only" in page.text and "/retry" not in page.text
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        for path in (f"/jobs/{dead}/retry", f"/jobs/{dead}/delete", "/kinds/pause", "/jobs/bulk"):
            r = await c.post(path, data={"csrf": token, "kind": "fetch", "action": "retry"})
            assert r.status_code == 403 and "read-only" in r.text
    assert (
        await status(conn, dead) == "dead" and await db.kinds.kind_paused_list(conn, schema=S) == []
    )


HOSTILE_KIND = "<script>alert('k')</script>\"'&"
HOSTILE_KEY = "\"'><img src=x onerror=alert(1)>" + "k" * 5000
HOSTILE_CARRY = json.dumps({"html": "</pre><script>alert('c')</script>", "payload": "x" * 50_000})
HOSTILE_TB = TRACEBACK + "<script>alert('tb')</script>\n\u202e\u0007 binary-looking \x01\x7f\n"


async def test_hostile_values_are_escaped_everywhere(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    [job_id] = await db.enqueue.job_insert_many(
        conn,
        schema=S,
        specs=[JobSpec(HOSTILE_KIND, HOSTILE_CARRY, 1, None, None, HOSTILE_KEY, 25)],
    )
    hostile = db.Claimant("<b>worker</b>:1")
    rows = await claim(conn, hostile, [HOSTILE_KIND], schema=S)
    assert await db.settle.job_fail_if_owned(
        conn,
        schema=S,
        claimant=hostile,
        job_id=job_id,
        attempt=rows[0]["attempt"],
        event="failed",
        error=HOSTILE_TB,
        carry=None,
        delay=0.0,
        force_dead=True,
    )
    await db.kinds.kind_pause(
        conn,
        schema=S,
        kinds=[HOSTILE_KIND],
        paused_by="<i>op</i>",
        reason="<script>alert('r')</script>",
    )
    pages = [
        "/",
        "/partials/overview",
        "/jobs",
        f"/jobs?kind={HOSTILE_KIND}",
        f"/jobs/{job_id}",
        "/kinds",
        "/workers",
        "/schedules",
        f"/jobs/bulk?action=retry&kind={HOSTILE_KIND}",
    ]
    for path in pages:
        r = await web.get(path)
        assert r.status_code == 200, path
        assert "alert(" not in r.text or "<script>alert" not in r.text, path
        assert "<script>" not in r.text.replace('<script src="/static/htmx.min.js" defer>', ""), (
            path
        )
        assert "<img" not in r.text and "<b>" not in r.text and "<i>op" not in r.text, path
        # Nothing the CSP would block: no inline script, no inline handlers or styles.
        assert not re.search(r"<script(?![^>]*\bsrc=)", r.text), path
        assert not re.search(r"\s(on\w+|style)\s*=", r.text.replace("onerror=alert", "")), path
        assert r.headers["content-security-policy"].startswith(
            "default-src 'self'; script-src 'self'"
        )
        assert r.headers["x-content-type-options"] == "nosniff"
    page = (await web.get(f"/jobs/{job_id}")).text
    assert "&lt;script&gt;alert(&#39;tb&#39;)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;" in page
    assert "truncated" in page  # the 50,000-character carry is cut on the page
    api = (await web.get(f"/api/jobs/{job_id}")).json()
    assert api["job"]["carry"] == json.loads(HOSTILE_CARRY)  # whole in the API
    assert api["job"]["kind"] == HOSTILE_KIND and api["job"]["key"] == HOSTILE_KEY


async def test_mounted_under_a_prefix_links_stay_inside_it(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    dead = await make(conn, "fetch", "dead")
    host = Starlette(routes=[Mount("/jobs-admin", venturi.web.app(pool, token=TOKEN))])
    async with client(host) as c:
        r = await c.get("/jobs-admin/jobs")
        assert r.status_code == 303 and r.headers["location"].startswith("/jobs-admin/login?")
        csrf = await csrf_of(c, "/jobs-admin/login")
        r = await c.post(
            "/jobs-admin/login", data={"csrf": csrf, "token": TOKEN, "next": "/jobs-admin/jobs"}
        )
        assert r.status_code == 303 and r.headers["location"] == "/jobs-admin/jobs"
        assert "Path=/jobs-admin/" in r.headers["set-cookie"]
        page = (await c.get("/jobs-admin/jobs")).text
        assert f'href="/jobs-admin/jobs/{dead}"' in page
        assert 'src="/jobs-admin/static/htmx.min.js"' in page
        hrefs = re.findall(r'(?:href|action|src|hx-get)="([^"#]+)"', page)
        assert hrefs and all(h.startswith("/jobs-admin/") for h in hrefs), hrefs
        assert (await c.get("/jobs-admin/static/htmx.min.js")).status_code == 200
        assert (await c.get("/jobs-admin/static/venturi.css")).status_code == 200


async def test_a_database_without_the_schema_is_a_one_line_503(empty_dsn: str) -> None:
    app = venturi.web.app(empty_dsn)
    async with client(app) as c:
        r = await c.get("/")
        assert r.status_code == 503 and "venturi schema apply" in r.text
        r = await c.get("/api/stats")
        assert r.status_code == 503 and "venturi schema apply" in r.json()["error"]
    await app.state.dashboard.db.close()


async def test_without_a_token_only_this_machines_names_are_served(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    # DNS rebinding: a page of rebind.attacker.example, its name rebound to 127.0.0.1, is
    # same-origin with the dashboard and its requests carry its own name in Host.
    dead = await make(conn, "fetch", "dead")
    app = venturi.web.app(pool)
    async with client(app, base_url="http://rebind.attacker.example:8080") as evil:
        for path in ("/", "/jobs", f"/api/jobs/{dead}", "/static/venturi.css"):
            r = await evil.get(path)
            assert r.status_code == 421 and r.text.count("\n") == 1, path
            assert r.headers["content-security-policy"].startswith("default-src 'self'")
        r = await evil.post(f"/jobs/{dead}/delete", data={"csrf": "x"})
        assert r.status_code == 421
    for base in (
        "http://localhost:8080",
        "http://127.0.0.1",
        "http://[::1]:1",
        "http://a.localhost",
    ):
        async with client(app, base_url=base) as c:
            assert (await c.get("/jobs")).status_code == 200, base
    assert await status(conn, dead) == "dead"


async def test_mounted_allowed_hosts_are_settable_and_checked(pool: asyncpg.Pool) -> None:
    # Mounted without a token behind the host application's own login, under its name.
    def mount(**kw: Any) -> Starlette:
        return Starlette(routes=[Mount("/jobs-admin", venturi.web.app(pool, **kw))])

    async with client(mount(), base_url="https://app.example.com") as c:
        r = await c.get("/jobs-admin/jobs")
        assert r.status_code == 421 and "allowed_hosts" in r.text
    for allowed in (["app.example.com"], ["APP.example.com."], ["*"]):
        async with client(mount(allowed_hosts=allowed), base_url="https://app.example.com") as c:
            assert (await c.get("/jobs-admin/jobs")).status_code == 200, allowed
    async with client(mount(allowed_hosts=["app.example.com"])) as c:
        assert (await c.get("/jobs-admin/jobs")).status_code == 200  # loopback: always
    async with client(mount(allowed_hosts=["app.example.com"]), base_url="http://x.test") as c:
        assert (await c.get("/jobs-admin/jobs")).status_code == 421
    # With a token any name is served by default (the token is what a rebound page lacks).
    async with client(mount(token=TOKEN), base_url="https://app.example.com") as c:
        assert (await c.get("/jobs-admin/login")).status_code == 200
    async with client(mount(token=TOKEN, allowed_hosts=["a.test"]), base_url="http://b.test") as c:
        assert (await c.get("/jobs-admin/login")).status_code == 421
    for bad in ("app.example.com", [""], ["a.test:80"], ["a b"], [1], ["http://a.test"]):
        with pytest.raises(venturi.ConfigError, match="allowed_hosts"):
            venturi.web.app(pool, allowed_hosts=bad)  # type: ignore[arg-type]
