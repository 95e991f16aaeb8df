"""`venturi web` served for real (uvicorn in a subprocess, over TCP): what only a server
shows. A page a DNS rebinding attack serves under its own name reaches the loopback
dashboard with that name in Host; a client on this machine sends X-Forwarded-For."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

import venturi
from tests.support.opsdata import make
from tests.support.web import CSRF, TOKEN, run_web, serving, status


async def test_a_rebound_name_is_refused_by_the_loopback_dashboard(
    dsn: str, conn: asyncpg.Connection
) -> None:
    victim = await make(conn, "billing", "pending")
    async with serving(dsn) as base:
        port = base.rsplit(":", 1)[1]
        evil = f"rebind.attacker.example:{port}"
        headers = {"Host": evil, "Origin": f"http://{evil}", "Sec-Fetch-Site": "same-origin"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as browser:
            for path in ("/jobs", f"/api/jobs/{victim}", "/login"):
                r = await browser.get(path)
                assert r.status_code == 421, (path, r.status_code)
                assert r.text.count("\n") == 1 and "rebind.attacker.example" in r.text
                assert r.headers["x-frame-options"] == "DENY"
            r = await browser.post(f"/jobs/{victim}/delete", data={"csrf": "x", "back": "/jobs"})
            assert r.status_code == 421
        # The names of this machine are served: localhost, 127.0.0.1, [::1] (any port).
        async with httpx.AsyncClient(base_url=base) as c:
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]", "LOCALHOST."):
                r = await c.get("/jobs", headers={"Host": host})
                assert r.status_code == 200, host
            token = CSRF.search(r.text).group(1)  # type: ignore[union-attr]
            r = await c.post(f"/jobs/{victim}/cancel", data={"csrf": token, "back": "/jobs"})
            assert r.status_code == 303
    assert await status(conn, victim) == "cancelled"


async def test_with_a_token_any_host_is_served_unless_allowed_hosts_are_named(
    dsn: str, tmp_path: Any
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with serving(dsn, "--token-file", str(token_file)) as base:
        async with httpx.AsyncClient(base_url=base, headers=bearer) as c:
            r = await c.get("/api/stats", headers={"Host": "jobs.example.com"})
            assert r.status_code == 200
    args = ("--token-file", str(token_file), "--allowed-host", "jobs.example.com")
    async with serving(dsn, *args) as base:
        async with httpx.AsyncClient(base_url=base, headers=bearer) as c:
            assert (await c.get("/api/stats", headers={"Host": "jobs.example.com"})).is_success
            assert (await c.get("/api/stats", headers={"Host": "localhost:1"})).is_success
            r = await c.get("/api/stats", headers={"Host": "other.example.com"})
            assert r.status_code == 421


async def cancel_as(base: str, job: int, headers: dict[str, str]) -> httpx.Response:
    """Cancel ``job`` from its page, every request with ``headers``: the page's answer."""
    async with httpx.AsyncClient(base_url=base, headers=headers) as c:
        page = await c.get(f"/jobs/{job}")
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        # A Secure cookie is one httpx keeps from http://: sent by hand as a browser
        # behind the TLS proxy would.
        cookie = "; ".join(f"{k}={v}" for k, v in page.cookies.items())
        r = await c.post(
            f"/jobs/{job}/cancel",
            data={"csrf": token, "back": "/jobs"},
            headers={"Cookie": cookie},
        )
        assert r.status_code == 303
        return page


async def test_forwarded_headers_are_trusted_only_from_the_named_proxies(
    dsn: str, conn: asyncpg.Connection
) -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}
    first, second = await make(conn, "billing", "pending"), await make(conn, "billing", "pending")
    async with serving(dsn) as base:
        page = await cancel_as(base, first, forwarded)
        assert "Secure" not in page.headers["set-cookie"]
    async with serving(dsn, "--forwarded-allow-ips", "127.0.0.1, 10.0.0.0/8") as base:
        page = await cancel_as(base, second, forwarded)
        assert "Secure" in page.headers["set-cookie"]  # https at the proxy
    workers = {
        j: [e.worker for e in await venturi.get_journal(conn, j) if e.event == "cancelled"]
        for j in (first, second)
    }
    assert workers == {first: ["web:127.0.0.1"], second: ["web:203.0.113.7"]}
    for bad in ("nope", "127.0.0.1,", "10.0.0.0/33"):
        code, err = await run_web("--dsn", dsn, "--forwarded-allow-ips", bad)
        assert code == 2 and "forwarded-allow-ips" in err and err.strip().count("\n") == 0, err
