"""Testing with venturi: a PostgreSQL to test against, one fresh database per test, and
``drain`` to run due jobs in-process.

The tiers, in order: a DSN from ``VENTURI_TEST_DSN``; a server already listening on
127.0.0.1:5432 (user postgres); a throwaway cluster started from PostgreSQL binaries on
the machine; the embedded PostgreSQL wheel. Each test then gets its own database cloned
from a template that has the schema applied, which takes a few tens of milliseconds.

Applications get the same through the pytest plugin (``venturi.pytest_plugin``, loaded
automatically once venturi is installed): the ``venturi_dsn`` fixture, and
``await venturi.testing.drain(venturi_dsn, tasks=[...])`` to enqueue, drain and assert.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg

from venturi import db
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA

if TYPE_CHECKING:
    from venturi.jobs import JobInfo
    from venturi.registry import Task

LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database of the same server."""
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


def _listening(host: str, port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


async def _answers(dsn: str) -> bool:
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except Exception:
        return False
    await conn.close()
    return True


def _find_bindir() -> str | None:
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for d in candidates:
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster started from the machine's binaries."""

    bindir: str
    root: str
    port: int
    user: str | None
    dsn: str = field(init=False)

    def __post_init__(self) -> None:
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        # PostgreSQL refuses to run as root: run its tools as an unprivileged user.
        subprocess.run(list(args), check=True, capture_output=True, user=self.user)

    def start(self) -> None:
        data = os.path.join(self.root, "data")
        if not os.path.exists(data):
            self._run(
                os.path.join(self.bindir, "initdb"),
                "-D",
                data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            )
        self._run(
            os.path.join(self.bindir, "pg_ctl"),
            "-D",
            data,
            "-w",
            "-t",
            "60",
            "-l",
            os.path.join(self.root, "log"),
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        data = os.path.join(self.root, "data")
        subprocess.run(
            [os.path.join(self.bindir, "pg_ctl"), "-D", data, "-m", mode, "-w", "stop"],
            capture_output=True,
            user=self.user,
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> Cluster | None:
    """A throwaway cluster from the machine's binaries, or None where there are none."""
    bindir = _find_bindir()
    if bindir is None:
        return None
    user = None
    if os.geteuid() == 0:
        import pwd

        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                user = name
                break
    root = tempfile.mkdtemp(prefix="venturi-cluster-")
    os.chmod(root, 0o755)
    if user is not None:
        shutil.chown(root, user=user)
    cluster = Cluster(bindir, root, _free_port(), user)
    try:
        cluster.start()
    except (subprocess.CalledProcessError, OSError):
        shutil.rmtree(root, ignore_errors=True)
        return None
    return cluster


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield an admin DSN of a PostgreSQL server, starting one if none is reachable.

    ``VENTURI_TEST_SERVER=cluster`` or ``=embedded`` skips the tiers before it, to run
    a suite on a throwaway cluster or on the embedded server whatever else is there.
    """
    env = os.environ.get("VENTURI_TEST_DSN")
    if env:
        yield env
        return
    forced = os.environ.get("VENTURI_TEST_SERVER", "")
    if forced not in ("", "local", "cluster", "embedded"):
        raise ValueError(f"VENTURI_TEST_SERVER must be local, cluster or embedded, got {forced!r}")
    if (
        forced in ("", "local")
        and _listening("127.0.0.1", 5432)
        and asyncio.run(_answers(LOCAL_DSN))
    ):
        yield LOCAL_DSN
        return
    cluster = start_cluster() if forced != "embedded" else None
    if cluster is not None:
        try:
            yield cluster.dsn
        finally:
            cluster.destroy()
        return
    from venturi import embedded

    server = embedded.start(prefix="venturi-test-pg-")
    try:
        yield server.dsn
    finally:
        server.stop()


class DatabaseFactory:
    """Makes one database per test, cloned from a template with the schema applied."""

    def __init__(self, admin_dsn: str, schema: str = DEFAULT_SCHEMA) -> None:
        self.admin_dsn = admin_dsn
        self.schema = schema
        self.template = f"venturi_tpl_{uuid.uuid4().hex[:12]}"

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.admin_dsn)

    async def setup(self) -> None:
        conn = await self._admin()
        try:
            await db.databases.database_create(conn, name=self.template)
        finally:
            await conn.close()
        conn = await asyncpg.connect(with_database(self.admin_dsn, self.template))
        try:
            await db.schema.apply_schema(conn, schema=self.schema)
        finally:
            await conn.close()

    async def create_empty(self) -> str:
        """A new database with nothing in it."""
        name = f"venturi_e_{uuid.uuid4().hex[:12]}"
        conn = await self._admin()
        try:
            await db.databases.database_create(conn, name=name)
        finally:
            await conn.close()
        return with_database(self.admin_dsn, name)

    async def create(self) -> str:
        """A new database cloned from the migrated template."""
        name = f"venturi_t_{uuid.uuid4().hex[:12]}"
        conn = await self._admin()
        try:
            # Cloning can fail while another session briefly touches the template.
            for attempt in range(20):
                try:
                    await db.databases.database_clone(conn, name=name, template=self.template)
                    break
                except asyncpg.ObjectInUseError:
                    if attempt == 19:
                        raise
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()
        return with_database(self.admin_dsn, name)

    async def drop(self, dsn: str) -> None:
        name = urllib.parse.urlsplit(dsn).path.lstrip("/")
        conn = await self._admin()
        try:
            await db.databases.database_drop(conn, name=name)
        finally:
            await conn.close()

    async def teardown(self) -> None:
        await self.drop(with_database(self.admin_dsn, self.template))


# --- for applications' tests: run due jobs in-process ---------------------------------


class _SharedConnection:
    """One asyncpg Connection made to look like a pool for a draining worker: its
    statements take turns on the connection (the worker's loop and heartbeat run
    concurrently), and LISTEN goes through the same lock."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.fetchval(*args, **kwargs)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await self.conn.execute(*args, **kwargs)

    async def acquire(self) -> _ListenOn:
        return _ListenOn(self)

    # asyncpg's Pool.release signature, hence the timeout parameter.
    async def release(self, conn: _ListenOn, *, timeout: float | None = None) -> None:  # noqa: ASYNC109
        conn.unhook()


class _ListenOn:
    """What the worker's LISTEN "acquires" from a ``_SharedConnection``."""

    def __init__(self, shared: _SharedConnection) -> None:
        self.shared = shared
        self.on_close: list[Callable[..., Any]] = []

    async def add_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        async with self.shared.lock:
            await self.shared.conn.add_listener(channel, callback)

    async def remove_listener(self, channel: str, callback: Callable[..., Any]) -> None:
        async with self.shared.lock:
            await self.shared.conn.remove_listener(channel, callback)

    def add_termination_listener(self, callback: Callable[..., Any]) -> None:
        self.shared.conn.add_termination_listener(callback)
        self.on_close.append(callback)

    def unhook(self) -> None:
        for callback in self.on_close:
            self.shared.conn.remove_termination_listener(callback)
        self.on_close.clear()


class _Observed:
    """The pool the draining worker gets: forwards every statement and, as each one ends,
    sets ``activity``, so ``drain`` looks at what is left right after the worker acted
    instead of on a timer."""

    def __init__(self, inner: Any, activity: asyncio.Event) -> None:
        self.inner = inner
        self.activity = activity

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetch(*args, **kwargs)
        finally:
            self.activity.set()

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetchrow(*args, **kwargs)
        finally:
            self.activity.set()

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.fetchval(*args, **kwargs)
        finally:
            self.activity.set()

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.execute(*args, **kwargs)
        finally:
            self.activity.set()

    def acquire(self) -> Any:
        return self.inner.acquire()

    async def release(self, conn: Any, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        return await self.inner.release(conn, timeout=timeout)


async def drain(
    target: str | asyncpg.Connection | asyncpg.Pool,
    tasks: Iterable[Task[Any]],
    state: Any = None,
    *,
    schema: str = DEFAULT_SCHEMA,
    give_up_after: float = 60.0,
    concurrency: int = 1,
    **worker_options: Any,
) -> dict[int, JobInfo]:
    """Run every due job of ``tasks``' kinds to settlement in this process, then stop;
    returns each job the run claimed, as it stands afterwards, by id.

    ``target`` is a DSN, an asyncpg Pool or a Connection (the jobs the connection's open
    transaction enqueued are visible then; handlers must not use that connection). Jobs
    that become due during the run (a pause without delay, a job a handler enqueued, a
    retry whose delay ends) run too; a job whose retry waits longer is left pending and
    reported with its failure. ``TimeoutError`` if due work remains after
    ``give_up_after`` seconds (a paused kind, a job that pauses forever). ``worker_options`` go to
    ``venturi.Worker`` (``failures_to_dead=True`` makes an exception settle dead).
    """
    from venturi.jobs import get_job
    from venturi.runtime.worker import Worker

    task_list = list(tasks)
    if not task_list:
        raise ConfigError("drain: give the tasks whose jobs to run")
    kinds = sorted({t.kind for t in task_list})
    identity = f"venturi.testing.drain:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    activity = asyncio.Event()
    own_pool = None
    if isinstance(target, str):
        own_pool = await db.connect.create_pool(target, min_size=1, max_size=3)
        inner: Any = own_pool
    elif isinstance(target, asyncpg.Connection):
        inner = _SharedConnection(target)
    elif isinstance(target, asyncpg.Pool):
        inner = target
    else:
        raise ConfigError(
            f"drain: target must be a DSN, an asyncpg Pool or Connection, got {target!r}"
        )
    try:

        async def remaining() -> int:
            # Read around the observer: drain's own reads must not count as activity.
            return await db.jobs.job_due_count(
                inner, schema=schema, kinds=kinds, claimed_by=identity
            )

        await db.schema.schema_version(inner, schema=schema)
        if await remaining() == 0:
            return {}
        options = {"concurrency": concurrency, "poll_max": 1.0, **worker_options}
        worker = Worker(
            state,
            _Observed(inner, activity),
            task_list,
            claimed_by=identity,
            schema=schema,
            **options,
        )
        shutdown = asyncio.Event()
        running = asyncio.create_task(worker.run(shutdown))
        deadline = asyncio.get_running_loop().time() + give_up_after
        left = -1
        try:
            while True:
                activity.clear()
                left = await remaining()
                if left == 0 or running.done():
                    break
                waiter = asyncio.create_task(activity.wait())
                budget = deadline - asyncio.get_running_loop().time()
                await asyncio.wait(
                    {waiter, running}, timeout=max(budget, 0), return_when=asyncio.FIRST_COMPLETED
                )
                waiter.cancel()
                if budget <= 0:
                    break
        finally:
            shutdown.set()
            await running  # re-raises what stopped the worker early (SchemaError, ...)
        if left:
            raise TimeoutError(
                f"drain: {left} job(s) of {', '.join(kinds)} still due after {give_up_after:g}s "
                "(a paused kind? a job that pauses forever?)"
            )
        ids = [
            r["id"]
            for r in await db.jobs.job_list_claimed_by(inner, schema=schema, claimed_by=identity)
        ]
        out: dict[int, JobInfo] = {}
        for job_id in ids:
            job = await get_job(inner, job_id, schema=schema)
            if job is not None:
                out[job_id] = job
        return out
    finally:
        if own_pool is not None:
            await own_pool.close()
