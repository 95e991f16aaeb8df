"""A PgBouncer in transaction pooling mode in front of the test server, on a loopback port.

Debian's ``pgbouncer`` package (``.ci/run`` installs it). Its configuration and auth file
live in a temporary directory of its own; every database name is forwarded to the server
(``* = host=... port=...``), so a test's own database is reachable through it as it is.
PgBouncer refuses to run as root: as root it switches to the ``postgres`` user (``-u``).
The benchmarks start it the same way (``benchmarks/scenarios/pooler.py``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from tests.support.ports import free_port


def binary() -> str | None:
    """The pgbouncer executable, if the machine has one."""
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class PgBouncer:
    """A running pgbouncer: ``through(dsn)`` is ``dsn`` pointed at it."""

    port: int
    pool_size: int
    process: subprocess.Popen[bytes]
    log_path: str

    def through(self, dsn: str, *, mark: bool = True) -> str:
        """``dsn`` (a URI of the server behind this pooler) with the pooler's host and
        port, marked ``pooler=transaction`` unless ``mark`` is False."""
        parts = urllib.parse.urlsplit(dsn)
        user = parts.username or "postgres"
        query = parts.query
        if mark:
            query = "&".join(q for q in (query, "pooler=transaction") if q)
        return urllib.parse.urlunsplit(
            parts._replace(netloc=f"{user}@127.0.0.1:{self.port}", query=query)
        )

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()


def _config(server_dsn: str, port: int, pool_size: int, root: str, max_clients: int) -> str:
    parts = urllib.parse.urlsplit(server_dsn)
    host, server_port = parts.hostname or "127.0.0.1", parts.port or 5432
    return f"""\
[databases]
* = host={host} port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = {max_clients}
max_db_connections = {pool_size}
; asyncpg sends none of these, other clients may
ignore_startup_parameters = extra_float_digits,options
server_check_delay = 0
"""


@contextlib.contextmanager
def running(
    server_dsn: str, *, pool_size: int = 10, max_clients: int = 1000
) -> Iterator[PgBouncer]:
    """Run pgbouncer in front of ``server_dsn``'s server (trust authentication, its
    user only) for the duration of the block; at most ``pool_size`` server connections
    per database."""
    exe = binary()
    if exe is None:
        raise RuntimeError("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    user = urllib.parse.urlsplit(server_dsn).username or "postgres"
    with tempfile.TemporaryDirectory(prefix="venturi-pgbouncer-") as root:
        # Readable by the user pgbouncer switches to; it writes nothing there.
        os.chmod(root, 0o755)
        port = free_port()
        ini = os.path.join(root, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write(_config(server_dsn, port, pool_size, root, max_clients))
        with open(os.path.join(root, "users.txt"), "w") as f:
            f.write(f'"{user}" ""\n')
        for name in ("pgbouncer.ini", "users.txt"):
            os.chmod(os.path.join(root, name), 0o644)
        args = [exe, ini]
        if os.geteuid() == 0:
            args[1:1] = ["-u", _unprivileged()]
        log_path = os.path.join(root, "pgbouncer.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        bouncer = PgBouncer(port, pool_size, proc, log_path)
        try:
            deadline = time.monotonic() + 10
            while not _listening(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not start:\n{bouncer.log()}")
                time.sleep(0.02)  # stays: the interval of a bounded poll of a subprocess
            yield bouncer
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _unprivileged() -> str:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name).pw_name
    raise RuntimeError("pgbouncer refuses to run as root and no unprivileged user was found")
