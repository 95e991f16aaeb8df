"""Operator views of the queue: ``venturi stats``, ``venturi purge``, ``venturi top``,
``venturi workers``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from venturi import sql, validate
from venturi.cli.app import app
from venturi.cli.common import (
    DsnOption,
    JsonOption,
    LivenessOption,
    SchemaOption,
    admin_run,
    echo_json,
    fail,
    liveness_seconds,
    make_console,
    need_dsn,
    run,
)
from venturi.db.errors import DATABASE_ERRORS, RETRYABLE, TRANSIENT, one_line
from venturi.errors import ConfigError, ConnectError, VenturiError
from venturi.status import DEFAULT_LIVENESS, JobStatus


@app.command("stats")
def stats(
    as_json: JsonOption = False,
    liveness: LivenessOption = DEFAULT_LIVENESS,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Per kind: jobs in each status, the oldest due job's wait, completions in the last
    minute, failed executions in the last hour, paused kinds and kinds with due jobs no
    live worker registers; then the workers, live (idle ones too) or gone."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    target = need_dsn(dsn)
    secs = liveness_seconds(liveness)
    result = admin_run(target, schema, lambda c: admin.stats(c, liveness=secs, schema=schema))
    if as_json:
        echo_json(result)
        return
    console = make_console()
    if not result.kinds and not result.workers:
        console.print("no jobs")
        return
    console.print(render.stats(result))


@app.command("workers")
def workers(
    as_json: JsonOption = False,
    liveness: LivenessOption = DEFAULT_LIVENESS,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """The registered workers: live, gone (no heartbeat for --liveness seconds) or
    stopped, with the claims each holds. Stopped ones are kept for a day."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    target = need_dsn(dsn)
    secs = liveness_seconds(liveness)
    found = admin_run(target, schema, lambda c: admin.list_workers(c, liveness=secs, schema=schema))
    if as_json:
        echo_json(found)
        return
    make_console().print(render.workers_table(found))


@app.command("purge")
def purge(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="Finished longer ago than this: 90s, 15m, 12h, 7d, 2w, 1h30m."
        ),
    ],
    status: Annotated[
        str, typer.Option(help="completed, dead or cancelled.")
    ] = JobStatus.COMPLETED.value,
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    batch: Annotated[int, typer.Option(help="Rows deleted per statement.")] = 1000,
    dry_run: Annotated[bool, typer.Option(help="Count what would go; delete nothing.")] = False,
    as_json: JsonOption = False,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Retention: delete finished jobs (and their journal) in batches."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py

    target = need_dsn(dsn)
    try:
        secs = admin.parse_duration(older_than)
    except ConfigError as exc:
        raise fail(f"older-than: {exc}") from None
    try:
        # Checked with --dry-run too: it counts what the run would delete, which refuses it.
        validate.integer(batch, "batch")
    except ConfigError as exc:
        raise fail(str(exc)) from None

    async def work(conn: Any) -> int:
        if dry_run:
            return await admin.purge_count(
                conn, status=status, older_than=secs, kind=kind, schema=schema
            )
        return await admin.purge(
            conn, status=status, older_than=secs, kind=kind, batch=batch, schema=schema
        )

    n = admin_run(target, schema, work)
    if as_json:
        echo_json(
            {
                "status": status,
                "older_than_seconds": secs,
                "kind": kind,
                "dry_run": dry_run,
                "jobs": n,
            }
        )
        return
    which = f"{status} job(s)" + (f" of kind {kind}" if kind else "")
    verb = "would purge" if dry_run else "purged"
    typer.echo(f"{verb} {n} {which} finished more than {older_than} ago")


@app.command("top")
def top(
    interval: Annotated[float, typer.Option(help="Seconds between frames.")] = 1.0,
    window: Annotated[float, typer.Option(help="Seconds over which done/s is averaged.")] = 10.0,
    once: Annotated[bool, typer.Option(help="Print one frame and exit.")] = False,
    as_json: JsonOption = False,
    liveness: LivenessOption = DEFAULT_LIVENESS,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """A live view: per kind pending / claimed / done per second / failed / dead, the
    oldest due job's wait, paused kinds and kinds no live worker runs; and the workers,
    live (idle ones too) or gone. Ctrl-C quits."""
    from venturi import admin  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    target = need_dsn(dsn)
    if not interval > 0 or not window > 0:
        raise fail("interval and window must be positive numbers of seconds")
    secs = liveness_seconds(liveness)

    async def frame(conn: Any) -> admin.TopFrame:
        return await admin.top_frame(conn, completed_window=window, liveness=secs, schema=schema)

    if once or as_json:
        result = admin_run(target, schema, frame)
        if as_json:
            echo_json(result)
        else:
            make_console().print(render.top(result))
        return
    with contextlib.suppress(KeyboardInterrupt):
        run(lambda: _top_live(target, schema, interval, frame))


async def _top_live(
    target: str,
    schema: str,
    interval: float,
    read: Callable[[Any], Awaitable[Any]],
    *,
    console: Any = None,
    frames: int | None = None,
) -> None:
    """Redraw every ``interval`` seconds (``frames`` times, or until interrupted); a lost
    connection is shown and retried, so the view outlives a database restart."""
    from rich.live import Live
    from rich.text import Text

    from venturi.admin import connection  # not at import: see venturi/cli/__init__.py
    from venturi.cli import render

    conn = await connection.connect(target, schema=schema)
    drawn = 0
    try:
        with Live(console=console or make_console(), auto_refresh=False, screen=False) as live:
            while frames is None or drawn < frames:
                if drawn:
                    await asyncio.sleep(interval)
                drawn += 1
                try:
                    if conn is None:
                        conn = await connection.connect(target, schema=None)
                    live.update(render.top(await read(conn)), refresh=True)
                except (*DATABASE_ERRORS, VenturiError) as exc:
                    live.update(Text(f"database error, retrying: {one_line(exc)}"), refresh=True)
                    if conn is not None:
                        conn.terminate()
                    conn = None
    finally:
        if conn is not None:
            await conn.close()


@app.command("metrics")
def metrics(
    port: Annotated[int, typer.Option("--port", help="Serve Prometheus metrics on this port.")],
    interval: Annotated[
        float, typer.Option(help="Seconds between reads of the queue (one statement each).")
    ] = 15.0,
    addr: Annotated[str, typer.Option(help="Address to listen on.")] = "0.0.0.0",
    liveness: LivenessOption = DEFAULT_LIVENESS,
    dsn: DsnOption = None,
    schema: SchemaOption = sql.DEFAULT_SCHEMA,
) -> None:
    """Export the queue gauges (jobs by kind and status, the oldest due job's wait, live
    and gone workers, paused kinds, kinds no live worker registers) for Prometheus,
    without a worker. Runs until SIGINT/SIGTERM."""
    target = need_dsn(dsn)
    try:
        validate.port(port, "port")
        every = validate.seconds(interval, "interval")
    except ConfigError as exc:
        raise fail(str(exc)) from None
    secs = liveness_seconds(liveness)
    with contextlib.suppress(KeyboardInterrupt):
        run(lambda: _export(target, schema, port, addr, every, secs))


# How long one read of the queue (its connect included) may take before the exporter gives
# it up, drops the connection and says venturi_queue_up 0. A server that stopped answering
# (frozen, a black-holed network) held the read, and up at 1, for good. The interval, as a
# read not done when the next is due is late already; at least READ_BOUND_MIN, so that a
# loaded server's slow read at a short interval does not flap up; at most READ_BOUND_MAX, so
# that a long interval still shows a silent server as down within two default scrapes.
READ_BOUND_MIN = 5.0
READ_BOUND_MAX = 30.0
# How long the goodbye of the connection may take at exit: a frozen server never answers.
CLOSE_TIMEOUT = 2.0


def read_bound(interval: float) -> float:
    """Seconds one read may take at ``interval`` (see READ_BOUND_MIN, READ_BOUND_MAX)."""
    return min(max(interval, READ_BOUND_MIN), READ_BOUND_MAX)


class _QueueReader:
    """The exporter's connection and its reads, each bounded by ``bound`` seconds and
    raced against ``stop``, so that a signal ends a read stuck on a silent server at once."""

    def __init__(
        self, target: str, schema: str, liveness: float, bound: float, stop: asyncio.Event
    ) -> None:
        self.target, self.schema, self.liveness = target, schema, liveness
        self.bound, self.stop = bound, stop
        self.conn: Any = None
        self.read_once = False

    async def _read(self) -> None:
        from venturi.admin import connection  # not at import: see venturi/cli/__init__.py
        from venturi.maintenance import gauges

        if self.conn is None:
            # The schema is checked until a read succeeds: its absence is configuration.
            checked = None if self.read_once else self.schema
            self.conn = await connection.connect(self.target, schema=checked)
        await gauges.refresh(self.conn, schema=self.schema, liveness=self.liveness)
        self.read_once = True

    async def read(self) -> bool:
        """Read the gauges once: False when ``stop`` came first; ``TimeoutError`` when
        the database did not answer within the bound (the connection is then dropped)."""
        reading = asyncio.ensure_future(self._read())
        stopping = asyncio.ensure_future(self.stop.wait())
        try:
            done, _ = await asyncio.wait(
                {reading, stopping}, timeout=self.bound, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopping.cancel()
        if reading in done:
            reading.result()
            return True
        # Dropped before the read is cancelled: a cancelled statement would send the
        # server a cancel request, which a silent server never answers either.
        self.drop()
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reading
        if self.stop.is_set():
            return False
        raise TimeoutError(f"the database did not answer within {self.bound:g}s")

    def drop(self) -> None:
        """Forget the connection (a broken or silent one) and say the queue is not read."""
        from venturi.maintenance import gauges

        gauges.collector().up = False
        if self.conn is not None:
            self.conn.terminate()
            self.conn = None

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close(timeout=CLOSE_TIMEOUT)
            self.conn = None


async def _export(
    target: str, schema: str, port: int, addr: str, interval: float, liveness: float
) -> None:
    """Read the gauges every ``interval`` on one connection (re-opened when it breaks or
    a read outlasts ``read_bound``; ``venturi_queue_up`` is 0 meanwhile) and serve the
    last read."""
    import logging
    import signal

    from venturi.runtime import instruments

    log = logging.getLogger("venturi.metrics")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    reader = _QueueReader(target, schema, liveness, read_bound(interval), stop)
    serving = False
    try:
        while True:
            try:
                if not await reader.read():
                    break
            except (*TRANSIENT, VenturiError) as exc:
                reader.drop()
                if not reader.read_once and not _outage(exc):
                    # Refused before any read succeeded (a bad DSN or password, no
                    # schema, a role without SELECT on a table): configuration, which
                    # retrying would not mend; said in one line.
                    raise fail(_said(exc)) from None
                log.warning("reading the queue failed (retrying): %s", one_line(exc))
            if not serving:
                # After the first attempt, so that bad configuration exits before it
                # listens; and even when that attempt met an outage, so that a scrape
                # says up 0 while the database is away.
                try:
                    instruments.serve(port, addr)
                except OSError as exc:
                    raise fail(f"port {port}: cannot listen ({exc.strerror or exc})") from None
                serving = True
                log.info(
                    "serving queue metrics on http://%s:%d/metrics, read every %gs",
                    addr,
                    port,
                    interval,
                )
            if await _stopped(stop, interval):
                break
        log.info("metrics exporter stopped")
    finally:
        await reader.close()


def _outage(exc: BaseException) -> bool:
    """Is ``exc`` the database out of reach (down, restarting, silent), which a later read
    may find mended, rather than configuration?"""
    # ConnectError keeps the driver's error it replaced as its context (raised in the
    # except block): a refused connection is an outage, a refused password is not. A
    # DSN the driver cannot parse is a ValueError, some of them an InterfaceError too.
    cause = exc.__context__ if isinstance(exc, ConnectError) else exc
    return isinstance(cause, RETRYABLE) and not isinstance(cause, ValueError)


def _said(exc: BaseException) -> str:
    """The one line of an error that ends the exporter."""
    if isinstance(exc, VenturiError):
        return str(exc)
    return f"reading the queue failed: {one_line(exc)}"


async def _stopped(stop: asyncio.Event, within: float) -> bool:
    """Whether ``stop`` is set within ``within`` seconds."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), within)
    return stop.is_set()
