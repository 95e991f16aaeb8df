"""The login's session at request level (the ASGI app over a real database through
httpx's ASGI transport): each login its own session, ended by its logout, refused past
its maximum age or in the old form; failed logins slowed down per client."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import asyncpg
import httpx

import venturi.web
from tests.support.web import TOKEN, client, csrf_of, run_web
from venturi.web.auth import SESSION_MAX_AGE


async def login(app: Any) -> httpx.AsyncClient:
    c = client(app)
    csrf = await csrf_of(c, "/login")
    r = await c.post("/login", data={"csrf": csrf, "token": TOKEN, "next": "/"})
    assert r.status_code == 303, r.text
    assert f"Max-Age={SESSION_MAX_AGE}" in r.headers["set-cookie"]
    return c


def with_cookie(app: Any, value: str) -> httpx.AsyncClient:
    return client(app, cookies={"venturi_session": value})


async def test_logout_ends_that_session_and_no_other(pool: asyncpg.Pool) -> None:
    app = venturi.web.app(pool, token=TOKEN)
    a, b = await login(app), await login(app)
    stolen, other = a.cookies["venturi_session"], b.cookies["venturi_session"]
    assert stolen != other and TOKEN not in stolen
    assert (await a.get("/api/stats")).status_code == 200
    csrf = await csrf_of(a, "/jobs")
    r = await a.post("/logout", data={"csrf": csrf})
    assert r.status_code == 303
    async with with_cookie(app, stolen) as thief:
        assert (await thief.get("/api/stats")).status_code == 401
        r = await thief.get("/jobs")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert (await b.get("/api/stats")).status_code == 200  # another login lives on
    await a.aclose()
    await b.aclose()


async def test_a_session_past_its_maximum_age_or_forged_is_refused(pool: asyncpg.Pool) -> None:
    app = venturi.web.app(pool, token=TOKEN)
    a = await login(app)
    value = a.cookies["venturi_session"]
    sessions = app.state.dashboard.guard.sessions
    now = time.time()
    sessions.clock = lambda: now + SESSION_MAX_AGE - 60
    assert (await a.get("/api/stats")).status_code == 200
    sessions.clock = lambda: now + SESSION_MAX_AGE + 60
    assert (await a.get("/api/stats")).status_code == 401
    sessions.clock = time.time
    # The old form, one value for every login (HMAC of the token), is no session now.
    old = hmac.new(TOKEN.encode(), b"venturi web session", hashlib.sha256).hexdigest()
    sid, issued, mac = value.split(".")
    later = str(int(issued) + 3600)
    for forged in (old, f"{sid}.{later}.{mac}", f"{sid}.{issued}.{'0' * len(mac)}", "", "a.b"):
        async with with_cookie(app, forged) as c:
            assert (await c.get("/api/stats")).status_code == 401, forged
    # Another dashboard's token signs other sessions.
    async with with_cookie(venturi.web.app(pool, token=TOKEN[::-1]), value) as c:
        assert (await c.get("/api/stats")).status_code == 401
    await a.aclose()


def from_address(app: Any, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def test_failed_logins_lock_that_client_out_for_a_while(pool: asyncpg.Pool) -> None:
    app = venturi.web.app(pool, token=TOKEN)
    logins = app.state.dashboard.guard.logins
    now = time.time()
    logins.clock = lambda: now
    async with from_address(app, "127.0.0.5") as guesser, from_address(app, "127.0.0.6") as op:
        csrf = await csrf_of(guesser, "/login")
        for n in range(logins.free):
            r = await guesser.post("/login", data={"csrf": csrf, "token": f"guess{n}"})
            assert r.status_code == 401, n
        # Locked out now, the right token included, with the time to wait.
        r = await guesser.post("/login", data={"csrf": csrf, "token": TOKEN})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert "too many failed logins" in r.text
        # Another client is not.
        csrf_op = await csrf_of(op, "/login")
        r = await op.post("/login", data={"csrf": csrf_op, "token": TOKEN, "next": "/"})
        assert r.status_code == 303
        # Once the wait is over the right token logs in; each failure after the free ones
        # doubles the wait, up to its cap.
        logins.clock = lambda: now + logins.max_wait
        r = await guesser.post("/login", data={"csrf": csrf, "token": TOKEN, "next": "/"})
        assert r.status_code == 303
    assert len(logins.failures) <= logins.max_clients


async def test_a_short_token_is_refused_at_start(pool: asyncpg.Pool, tmp_path: Any) -> None:
    import pytest

    with pytest.raises(venturi.ConfigError, match="token must be at least 16 characters"):
        venturi.web.app(pool, token="a" * 15)
    short = tmp_path / "token"
    short.write_text("abc\n")
    for args, env, knob in (
        (["--token-file", str(short)], {"VENTURI_WEB_TOKEN": ""}, "--token-file"),
        ([], {"VENTURI_WEB_TOKEN": "x" * 15}, "VENTURI_WEB_TOKEN"),
    ):
        code, text = await run_web("--dsn", "postgresql://x@127.0.0.1:1/y", *args, env=env)
        assert code == 2 and text.strip().count("\n") == 0, text
        assert knob in text and "at least 16 characters" in text
