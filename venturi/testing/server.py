"""A PostgreSQL server to test against: found, or started for the session.

The tiers, in order: a DSN from ``VENTURI_TEST_DSN``; a server already listening on
127.0.0.1:5432 (user postgres); a throwaway cluster started from PostgreSQL binaries on
the machine; the embedded PostgreSQL wheel.
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
from collections.abc import Iterator
from dataclasses import dataclass, field

import asyncpg

from venturi.db.connect import plain_dsn

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


def find_bindir() -> str | None:
    """The directory of this machine's ``initdb`` and ``pg_ctl`` (``pg_config --bindir``,
    else the newest ``/usr/lib/postgresql/*/bin``), or None."""
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
    bindir = find_bindir()
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
        yield plain_dsn(env)
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
