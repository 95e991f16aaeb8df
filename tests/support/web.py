"""The dashboard under test, in process: an httpx client on its ASGI app, the CSRF token a
page carries, a form posted as a page posts it (the web tests' shared pieces)."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import httpx

import venturi

# The token every page names in its <meta name="csrf-token">.
CSRF = re.compile(r'name="csrf-token" content="([0-9a-f]+)"')
# The operator's token of the apps these tests build with one.
TOKEN = "t0ken-for-the-dashboard-tests-0123456789"


def client(app: Any, **kw: Any) -> httpx.AsyncClient:
    """A client on ``app`` with no server between (``kw``: httpx's own, e.g. headers)."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), **{"base_url": "http://127.0.0.1", **kw}
    )


async def csrf_of(c: httpx.AsyncClient, path: str) -> str:
    """The CSRF token of the page at ``path``, as ``c`` sees it (its session)."""
    r = await c.get(path)
    assert r.status_code == 200, r.text
    m = CSRF.search(r.text)
    assert m, "no CSRF field on the page"
    return m.group(1)


async def post(
    c: httpx.AsyncClient, path: str, data: dict[str, Any], back: str = "/jobs"
) -> httpx.Response:
    """Post a form as the page ``back`` does; an action's 303 is followed back there."""
    token = await csrf_of(c, "/")
    r = await c.post(path, data={"csrf": token, "back": back, **data})
    if r.status_code != 303:
        return r
    assert r.headers["location"] == back
    return await c.get(r.headers["location"])


async def status(conn: asyncpg.Connection, job_id: int) -> str | None:
    job = await venturi.get_job(conn, job_id)
    return None if job is None else job.status
