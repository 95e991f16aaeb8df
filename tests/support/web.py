"""The dashboard under test, in process (an httpx client on its ASGI app, the CSRF token a
page carries, a form posted as a page posts it) or served by `venturi web` (the web tests'
shared pieces)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx

import venturi
from tests.support import wait_for

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


@asynccontextmanager
async def serving(dsn: str, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[str]:
    """`venturi web --dsn DSN ARGS` on a free loopback port (no token from the environment):
    its base URL once it printed its banner and listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "web",
        "--dsn",
        dsn,
        "--port",
        str(port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "VENTURI_WEB_TOKEN": "", **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert proc.stdout is not None
        banner = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert banner.startswith(f"venturi dashboard on {base}/"), banner
        # The banner comes before uvicorn listens: nothing it prints says it does.
        async with httpx.AsyncClient(base_url=base) as c:

            async def listening() -> bool:
                try:
                    await c.get("/login")
                except httpx.ConnectError:
                    assert proc.returncode is None, "venturi web exited before it listened"
                    return False
                return True

            await wait_for(listening, within=30)
        yield base
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.communicate()


async def run_web(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`venturi web ARGS` that is expected to exit (bad input): its code and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "venturi",
        "web",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()
