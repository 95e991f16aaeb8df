"""``venturi demo``: a bookmark service, end to end, offline.

A bookmark service fetches pages and sends emails in the background. The "web" is a
small HTTP server this demo starts on 127.0.0.1, so nothing leaves the machine. Some
pages are long and checkpoint their progress with ``pause``, some fail once and are
retried, one is gone for good and dies; emails go to an in-memory outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import sys
from dataclasses import dataclass, field
from datetime import timedelta

import msgspec

import venturi
from venturi import db
from venturi.backoff import Backoff
from venturi.context import Context
from venturi.db.conn import Conn
from venturi.priority import Priority
from venturi.status import JobStatus


class FetchBookmark(msgspec.Struct):
    """The carry of a fetch: where, and how many pages of a long document are done."""

    url: str
    pages_done: int = 0


class SendEmail(msgspec.Struct):
    to: str
    subject: str


@dataclass
class App:
    """The shared state every handler sees as ``ctx.state``."""

    base_url: str
    outbox: list[SendEmail] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)


class HTTPError(Exception):
    pass


async def http_get(url: str) -> str:
    """A minimal HTTP/1.0 GET, enough for the demo's local server."""
    rest = url.removeprefix("http://")
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = raw.decode().partition("\r\n\r\n")
    status = int(head.split()[1])
    if status != 200:
        raise HTTPError(f"GET {url}: HTTP {status}")
    return body


@venturi.task(
    kind="fetch_bookmark",
    priority=Priority.HIGH,
    lease=timedelta(minutes=5),
    cap=4,
    backoff=Backoff.fixed(0.1),
    max_failures=3,
)
async def fetch_bookmark(ctx: Context[App], carry: FetchBookmark) -> venturi.Outcome:
    """Fetch a bookmarked page; long documents are fetched a page per run."""
    html = await http_get(carry.url)
    if html.startswith("<gone>"):
        return venturi.dead(f"{carry.url} is gone for good")
    if html.startswith("<long pages="):
        pages = int(html.split("=", 1)[1].split(">", 1)[0])
        if carry.pages_done + 1 < pages:
            # Checkpoint: the next run resumes after this page, on any worker.
            return venturi.pause(FetchBookmark(carry.url, carry.pages_done + 1))
    ctx.state.titles[carry.url] = html.split("<title>")[-1].split("</title>")[0]
    return venturi.complete({"url": carry.url, "pages": carry.pages_done + 1})


@venturi.task(kind="send_email", priority=Priority.NORMAL, backoff=Backoff.fixed(0.1))
async def send_email(ctx: Context[App], carry: SendEmail) -> None:
    """Send an email (to the in-memory outbox)."""
    await asyncio.sleep(random.uniform(0.001, 0.005))
    ctx.state.outbox.append(carry)


class LocalWeb:
    """The demo's web: /page/N answers a title; /long/N has pages; /flaky/N fails on its
    first request; /gone answers a tombstone."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await reader.readuntil(b"\r\n\r\n")).decode()
            path = request.split()[1]
            status, body = 200, f"<title>Page {path}</title>"
            if path.startswith("/long/"):
                body = f"<long pages=3><title>Long read {path}</title>"
            elif path.startswith("/flaky/") and path not in self.seen:
                status, body = 503, "try again"
            elif path == "/gone":
                body = "<gone>"
            self.seen.add(path)
            writer.write(f"HTTP/1.0 {status} X\r\n\r\n{body}".encode())
            await writer.drain()
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


# The most bookmarks a demo fetches: the demo shows the behaviours (checkpoints, retries,
# a dead job, priorities) at any size, and a larger run only keeps an embedded server busy
# for minutes in /tmp; throughput is measured by benchmarks/, not here.
MAX_JOBS = 10_000


async def main(dsn: str | None, n: int) -> signal.Signals | None:
    """Apply the schema, enqueue, run a worker until every job settles, print a summary.
    SIGINT or SIGTERM stops it early, its embedded server stopped and its data removed:
    the signal that did, else None."""
    stopped: list[signal.Signals] = []
    this = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def stop(sig: signal.Signals) -> None:
        # The first signal cancels the run, whose cleanup then runs; a second would
        # cancel the cleanup, and SIGTERM's default (the process ended at once) left the
        # embedded server running, orphaned, with its data in /tmp.
        if not stopped and this is not None:
            stopped.append(sig)
            this.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    server = None
    try:
        if not dsn:
            from venturi import embedded

            print("starting the embedded PostgreSQL ...", file=sys.stderr)
            server = embedded.start(prefix="venturi-demo-")
            dsn = server.dsn
        web = LocalWeb()
        await web.start()
        try:
            await _run(dsn, n, web)
        finally:
            await web.stop()
    except asyncio.CancelledError:
        if not stopped:
            raise
    finally:
        if server is not None:
            server.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return stopped[0] if stopped else None


async def _run(dsn: str, n: int, web: LocalWeb) -> None:
    conn = await db.connect.connect(dsn)
    try:
        await db.schema.apply_schema(conn, schema="venturi")
        base = f"http://127.0.0.1:{web.port}"
        urls = []
        for i in range(n):
            if i == 0:
                urls.append(f"{base}/gone")
            elif i % 10 == 0:
                urls.append(f"{base}/long/{i}")
            elif i % 7 == 0:
                urls.append(f"{base}/flaky/{i}")
            else:
                urls.append(f"{base}/page/{i}")
        jobs = [fetch_bookmark.job(FetchBookmark(u)) for u in urls]
        jobs += [
            send_email.job(SendEmail(f"user{i}@example.test", f"Your bookmark {i} is saved"))
            for i in range(max(1, n // 2))
        ]
        ids = await venturi.enqueue_many(conn, jobs)
        print(f"enqueued {len(ids)} jobs ({len(urls)} fetches, {len(jobs) - len(urls)} emails)")
        state = App(base)
        worker = venturi.Worker(
            state, dsn, [fetch_bookmark, send_email], concurrency=16, poll_max=1.0
        )
        shutdown = asyncio.Event()
        running = asyncio.create_task(worker.run(shutdown))
        try:
            await _progress(conn, ids, running)
        finally:
            # Stopped early too: the worker ends its runs and closes its pool before the
            # server it uses stops (else its connections' errors were tracebacks).
            shutdown.set()
            await running
        print()
        print(f"{'kind':<16}{'status':<12}{'jobs':>6}")
        for row in await db.reads.job_counts(conn, schema="venturi", ids=ids):
            print(f"{row['kind']:<16}{row['status']:<12}{row['jobs']:>6}")
        print(f"emails in the outbox: {len(state.outbox)}; pages titled: {len(state.titles)}")
    finally:
        await conn.close()


async def _progress(conn: Conn, ids: list[int], running: asyncio.Task[None]) -> None:
    total = len(ids)
    from rich.progress import Progress

    with Progress(transient=False) as bar:
        job = bar.add_task("settling jobs", total=total)
        while True:
            counts = await db.reads.job_counts(conn, schema="venturi", ids=ids)
            settled = sum(
                r["jobs"] for r in counts if r["status"] in (JobStatus.COMPLETED, JobStatus.DEAD)
            )
            bar.update(job, completed=settled)
            if settled >= total:
                return
            if running.done():
                running.result()  # a worker that stopped early raises its error here
                return
            await asyncio.sleep(0.1)
