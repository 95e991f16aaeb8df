"""Enqueue from a web request, FastAPI style, without any web framework installed.

``app`` below is a plain ASGI application: the interface FastAPI and Starlette build for
you, and that uvicorn or hypercorn serve. Its ``POST /bookmarks`` handler stores the
bookmark and enqueues the job that fetches its title in one transaction, then answers
``202 Accepted`` at once; a worker does the slow part. With FastAPI the same endpoint is:

    @api.post("/bookmarks", status_code=202)
    async def create_bookmark(body: BookmarkIn, request: Request) -> dict:
        async with request.app.state.pool.acquire() as conn, conn.transaction():
            bookmark_id = await conn.fetchval("INSERT INTO example_bookmarks ...", body.url)
            job_id = await fetch_title.enqueue(conn, FetchTitle(bookmark_id, body.url),
                                               key=body.url)
        return {"bookmark": bookmark_id, "job": job_id}

This script drives the app in-process, the way an ASGI test client does (no server, no
network), runs a worker until the titles are in, and reads them back through the app.

Run it against a database with the venturi schema applied:

    venturi schema apply --dsn "$VENTURI_DSN"
    VENTURI_DSN=postgresql://... python examples/web_enqueue.py
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec

import venturi
from venturi import Context

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BookmarkIn(msgspec.Struct):
    """The request body; msgspec validates it as FastAPI's pydantic model would."""

    url: str


class FetchTitle(msgspec.Struct):
    bookmark_id: int
    url: str


@dataclass
class Jobs:
    """The worker's state: the pool its handlers write with."""

    pool: asyncpg.Pool


@venturi.task(kind="example_fetch_title", max_failures=5)
async def fetch_title(ctx: Context[Jobs], carry: FetchTitle) -> None:
    # A real service would fetch the page; the title is made up so that nothing leaves
    # the machine.
    host = urllib.parse.urlsplit(carry.url).hostname or carry.url
    await ctx.state.pool.execute(
        "UPDATE example_bookmarks SET title = $1 WHERE id = $2",
        f"Welcome to {host}",
        carry.bookmark_id,
    )


# --- the ASGI application -------------------------------------------------------------

POOL: asyncpg.Pool | None = None


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
    elif scope["type"] == "http":
        status, body = await route(scope, receive)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": msgspec.json.encode(body)})


async def lifespan(receive: Receive, send: Send) -> None:
    """Startup opens the pool (FastAPI's lifespan), shutdown closes it."""
    global POOL
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            POOL = await asyncpg.create_pool(os.environ["VENTURI_DSN"], min_size=1, max_size=4)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if POOL is not None:
                await POOL.close()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def route(scope: Scope, receive: Receive) -> tuple[int, Any]:
    method, path = scope["method"], scope["path"]
    if method == "POST" and path == "/bookmarks":
        return await create_bookmark(await read_body(receive))
    if method == "GET" and path.startswith("/bookmarks/"):
        return await get_bookmark(int(path.rsplit("/", 1)[1]))
    return 404, {"detail": "not found"}


async def read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def create_bookmark(raw: bytes) -> tuple[int, Any]:
    try:
        data = msgspec.json.decode(raw, type=BookmarkIn)
    except msgspec.ValidationError as exc:
        return 422, {"detail": str(exc)}  # nothing written, nothing enqueued
    assert POOL is not None
    async with POOL.acquire() as conn, conn.transaction():
        bookmark_id = await conn.fetchval(
            "INSERT INTO example_bookmarks (url) VALUES ($1)"
            " ON CONFLICT (url) DO UPDATE SET url = excluded.url RETURNING id",
            data.url,
        )
        # The key makes a double submit (a retried request) one job, not two.
        job_id = await fetch_title.enqueue(conn, FetchTitle(bookmark_id, data.url), key=data.url)
    return 202, {"bookmark": bookmark_id, "job": job_id}


async def get_bookmark(bookmark_id: int) -> tuple[int, Any]:
    assert POOL is not None
    row = await POOL.fetchrow(
        "SELECT id, url, title FROM example_bookmarks WHERE id = $1", bookmark_id
    )
    return (404, {"detail": "no such bookmark"}) if row is None else (200, dict(row))


# --- driving it in-process, as an ASGI test client does ----------------------------------


async def request(method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": []}
    await app(scope, receive, send)
    return sent[0]["status"], msgspec.json.decode(sent[1]["body"])


class Lifespan:
    """Runs the app's lifespan around a block: startup on enter, shutdown on exit."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __aenter__(self) -> Lifespan:
        self.task = asyncio.create_task(app({"type": "lifespan"}, self.inbox.get, self.outbox.put))
        await self.inbox.put({"type": "lifespan.startup"})
        assert (await self.outbox.get())["type"] == "lifespan.startup.complete"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.outbox.get()
        await self.task


async def main() -> None:
    dsn = os.environ["VENTURI_DSN"]
    conn = await asyncpg.connect(dsn)
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS example_bookmarks ("
        " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, url text UNIQUE NOT NULL,"
        " title text)"
    )
    await conn.close()
    run = uuid.uuid4().hex[:6]
    urls = [f"https://{name}-{run}.example.test/" for name in ("python", "postgres")]

    async with Lifespan():
        accepted = []
        for url in urls:
            status, body = await request("POST", "/bookmarks", msgspec.json.encode({"url": url}))
            print(f"POST /bookmarks {url} -> {status} {body}")
            assert status == 202
            accepted.append(body)
        # The same bookmark again (a browser's retry): same job, nothing new to do.
        status, again = await request("POST", "/bookmarks", msgspec.json.encode({"url": urls[0]}))
        print(f"POST /bookmarks {urls[0]} again -> {status} {again}")
        assert again == accepted[0]
        status, _ = await request("POST", "/bookmarks", b'{"link": 1}')
        print(f"POST /bookmarks with a bad body -> {status}")
        assert status == 422

        # A worker, usually its own process (`venturi worker web_enqueue:...`), fetches.
        pool = await asyncpg.create_pool(dsn, min_size=2, max_size=4)
        worker = venturi.Worker(Jobs(pool), pool, [fetch_title], poll_max=1.0)
        shutdown = asyncio.Event()
        running = asyncio.create_task(worker.run(shutdown))
        for body in accepted:
            while True:
                job = await venturi.get_job(pool, body["job"])
                if job is not None and job.status == "completed":
                    break
                if running.done():
                    running.result()
                await asyncio.sleep(0.05)
        shutdown.set()
        await running
        await pool.close()

        for body in accepted:
            status, bookmark = await request("GET", f"/bookmarks/{body['bookmark']}")
            print(f"GET /bookmarks/{body['bookmark']} -> {status} {bookmark}")
            assert bookmark["title"].startswith("Welcome to ")
    print("ok: accepted at once, titled in the background")


if __name__ == "__main__":
    asyncio.run(main())
