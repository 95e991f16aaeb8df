"""The venturi dashboard mounted under /jobs-admin of an application's own Starlette app.

The host application keeps its routes and its lifespan (which opens the pool the
dashboard shares); the dashboard's links, cookies and static files all stay under the
prefix. With FastAPI it is the same line: ``api.mount("/jobs-admin", dashboard)``.

Needs the web extra (``pip install 'venturi-jobs[web]'``) and a database with the venturi
schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... VENTURI_WEB_TOKEN=... python examples/mount_dashboard.py --serve

Without ``--serve`` the script serves on a free loopback port, makes the requests an
operator's browser and a script would make, prints what they got, and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import venturi
import venturi.web
from venturi import Context


class Invoice(msgspec.Struct):
    number: str


@venturi.task(kind="example_send_invoice")
async def send_invoice(ctx: Context[None], carry: Invoice) -> None:
    pass


POOL: asyncpg.Pool | None = None
TOKEN = os.environ.get("VENTURI_WEB_TOKEN") or secrets.token_hex(32)


class SharedPool:
    """The dashboard is built before the pool exists; it asks for a connection only when
    a request comes, by which time the lifespan has opened the pool."""

    def acquire(self) -> Any:
        assert POOL is not None, "the lifespan opens the pool before any request"
        return POOL.acquire()


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    global POOL
    POOL = await asyncpg.create_pool(os.environ["VENTURI_DSN"], min_size=1, max_size=4)
    try:
        yield
    finally:
        await POOL.close()


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the application's own page")


app = Starlette(
    routes=[
        Route("/", home),
        # The journal names the operator of every action; here, the client's address.
        Mount("/jobs-admin", venturi.web.app(SharedPool(), token=TOKEN)),
    ],
    lifespan=lifespan,
)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


async def demo() -> None:
    async with asyncpg.create_pool(os.environ["VENTURI_DSN"], min_size=1, max_size=2) as pool:
        job_id = await send_invoice.enqueue(pool, Invoice("2026-0042"))
    # Listening before uvicorn starts: the first requests wait in the backlog.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        for path, headers in [
            ("/", None),
            ("/jobs-admin/", None),
            ("/jobs-admin/api/stats", None),
            ("/jobs-admin/api/stats", bearer),
            (f"/jobs-admin/api/jobs/{job_id}", bearer),
        ]:
            status, body, got = await asyncio.to_thread(get, base + path, headers)
            note = got.get("location", "") if status == 303 else body.splitlines()[0][:60]
            print(f"GET {path}{' (bearer)' if headers else ''} -> {status} {note}")
            if path.endswith(f"/{job_id}") and status == 200:
                job = json.loads(body)["job"]
                print(f"job {job['id']}: {job['kind']} {job['status']} carry={job['carry']}")
    finally:
        server.should_exit = True
        await serving


if __name__ == "__main__":
    if "--serve" in sys.argv:
        print(f"dashboard on http://127.0.0.1:8000/jobs-admin/ (token: {TOKEN})")
        uvicorn.run(app, host="127.0.0.1", port=8000)
    else:
        asyncio.run(demo())
