"""The dashboard's answers to hostile input at request level (the ASGI app over a real
database through httpx's ASGI transport): a signal's payload nested a thousand deep, a
failure's 500 (with the security headers every answer carries), next= and back= under
a mount, job ids in other scripts' digits."""

from __future__ import annotations

import asyncio
import sys

import asyncpg
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

import venturi
import venturi.web
from tests.support.opsdata import make
from tests.support.web import TOKEN, client, csrf_of

DEEP = "[" * 1000 + "]" * 1000


def headers_ok(r: httpx.Response) -> None:
    assert r.headers["content-security-policy"].startswith("default-src 'self'")
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["cache-control"] == "no-store"


async def test_a_deeply_nested_signal_payload_is_a_400(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    job = await make(conn, "flow", "pending")
    before = await venturi.get_journal(conn, job)
    token = await csrf_of(web, f"/jobs/{job}")
    for payload in (DEEP, "[" * 201 + "]" * 201, '{"a":' * 250 + "1" + "}" * 250):
        data = {"csrf": token, "back": f"/jobs/{job}", "name": "approval", "payload": payload}
        r = await web.post(f"/jobs/{job}/signal", data=data)
        assert r.status_code == 400 and "nested deeper than 200" in r.text, r.text[:200]
        headers_ok(r)
    assert await venturi.get_journal(conn, job) == before
    data = {
        "csrf": token,
        "back": f"/jobs/{job}",
        "name": "approval",
        "payload": "[" * 100 + "]" * 100,
    }
    r = await web.post(f"/jobs/{job}/signal", data=data)
    assert r.status_code == 303


async def test_a_500_carries_the_security_headers(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    dead = await make(conn, "fetch", "dead")

    def operator(request: Request) -> str:
        raise RuntimeError("the application's operator function failed")

    app = venturi.web.app(pool, operator=operator)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        token = await csrf_of(c, "/")
        r = await c.post(f"/jobs/{dead}/retry", data={"csrf": token, "back": "/jobs"})
        assert r.status_code == 500
        headers_ok(r)


async def test_the_command_refuses_a_deeply_nested_signal_payload(
    dsn: str, conn: asyncpg.Connection
) -> None:
    job = await make(conn, "flow", "pending")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "jobs",
        "signal",
        str(job),
        "approval",
        "--json",
        DEEP,
        "--dsn",
        dsn,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2 and err.decode().strip().count("\n") == 0, err.decode()
    assert "nested deeper than 200" in err.decode()


async def test_next_and_back_never_leave_the_mount(
    pool: asyncpg.Pool, conn: asyncpg.Connection
) -> None:
    dead = await make(conn, "fetch", "dead")
    host = Starlette(routes=[Mount("/jobs-admin", venturi.web.app(pool, token=TOKEN))])
    escapes = [
        "/account/close",
        "/jobs-admin/../account/close",
        "/jobs-admin/%2e%2e/account/close",
        "/jobs-admin/%2E./account/close",
        "/jobs-admin/jobs/./../../account",
        "/jobs-admin/..",
        "/jobs-admin/..?next=/",
        "/jobs-admin/%252e%252e/account",
    ]
    async with client(host) as c:
        for target in escapes:
            csrf = await csrf_of(c, "/jobs-admin/login")
            data = {"csrf": csrf, "token": TOKEN, "next": target}
            r = await c.post("/jobs-admin/login", data=data)
            assert r.headers["location"] == "/jobs-admin/", target
        for target in escapes:
            csrf = await csrf_of(c, "/jobs-admin/jobs")
            r = await c.post(f"/jobs-admin/jobs/{dead}/retry", data={"csrf": csrf, "back": target})
            assert r.status_code == 303 and r.headers["location"] == "/jobs-admin/", target
        kept = "/jobs-admin/jobs?q=a..b&kind=x.y"
        csrf = await csrf_of(c, "/jobs-admin/login")
        r = await c.post("/jobs-admin/login", data={"csrf": csrf, "token": TOKEN, "next": kept})
        assert r.headers["location"] == kept


async def test_ids_and_cursors_take_ascii_digits_only(
    conn: asyncpg.Connection, web: httpx.AsyncClient
) -> None:
    job = await make(conn, "fetch", "dead")
    assert job < 10
    arabic, fullwidth = chr(0x660 + job), chr(0xFF10 + job)
    for raw in (arabic, fullwidth, f"0_{job}", f" {job}", f"+{job}"):
        for path in (f"/jobs/{raw}", f"/api/jobs/{raw}"):
            r = await web.get(path)
            assert r.status_code == 400 and "positive integer" in r.text, path
        for path in (f"/jobs?before={raw}", f"/jobs?after={raw}", f"/api/jobs?before={raw}"):
            r = await web.get(path)
            assert r.status_code == 400 and "integer" in r.text, path
        token = await csrf_of(web, "/jobs")
        r = await web.post(
            "/jobs/selected", data={"csrf": token, "action": "retry", "ids": raw, "back": "/jobs"}
        )
        assert r.status_code == 400, raw
        r = await web.post(
            "/jobs/bulk", data={"csrf": token, "action": "retry", "up_to": raw, "back": "/jobs"}
        )
        assert r.status_code == 400, raw
    assert (await web.get(f"/jobs/{job}")).status_code == 200
    assert (await web.get(f"/jobs?before={job + 1}")).status_code == 200
    assert (await venturi.get_job(conn, job)).status == "dead"  # type: ignore[union-attr]
