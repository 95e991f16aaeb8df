"""A primary and a synchronous streaming standby on this machine, for failover.

``start_pair()`` starts a throwaway primary (``venturi.testing.start_cluster``, the kind
the chaos harness runs on), clones it with ``pg_basebackup -R`` into a second data
directory, starts that as a standby streaming from the primary under the name
``venturi_standby``, and only then turns on synchronous replication on the primary
(``synchronous_standby_names``): so a commit the primary acknowledges is already flushed
on the standby, and the standby itself, once promoted, does not wait for a standby of its
own. ``Pair.fail_over()`` stops the primary hard (``pg_ctl stop -m immediate``) and
promotes the standby. ``Pair.dsn`` names both hosts with
``target_session_attrs=read-write``, which asyncpg and libpq both understand: a client
reconnecting after the failover finds whichever answers as the primary.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

import asyncpg

from tests.support import sql as pgsql
from tests.support.ports import free_port
from venturi import testing
from venturi.testing import server

STANDBY_NAME = "venturi_standby"


def missing_tools() -> str | None:
    """Why a pair cannot be built here, or None."""
    bindir = server.find_bindir()
    if bindir is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) on this machine"
    if not os.path.exists(os.path.join(bindir, "pg_basebackup")):
        return f"no pg_basebackup in {bindir}"
    return None


@dataclass
class Pair:
    primary: testing.Cluster
    standby: testing.Cluster
    promoted: float | None = None  # when the standby answered as a primary
    stopped: float | None = None  # when the old primary was stopped

    @property
    def dsn(self) -> str:
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            "/postgres?target_session_attrs=read-write"
        )

    def _pg_ctl(self, cluster: testing.Cluster, *args: str) -> None:
        data = os.path.join(cluster.root, "data")
        cluster._run(os.path.join(cluster.bindir, "pg_ctl"), "-D", data, *args)

    def fail_over(self, timeout: float = 60) -> float:
        """Stop the primary hard, promote the standby; seconds until it takes writes."""
        start = time.time()
        self.primary.stop("immediate")
        self.stopped = time.time()
        self._pg_ctl(self.standby, "promote", "-w", "-t", str(int(timeout)))
        asyncio.run(_wait_primary(self.standby.dsn, timeout))
        self.promoted = time.time()
        return self.promoted - start

    def destroy(self) -> None:
        self.standby.destroy()
        self.primary.destroy()


async def _wait_primary(dsn: str, within: float) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                if not await conn.fetchval(pgsql.statement("server_in_recovery")):
                    return
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{dsn} did not become a primary within {within:g}s")
        await asyncio.sleep(0.1)  # stays: the interval of a bounded poll of another server


async def _wait_sync(primary_dsn: str, within: float) -> None:
    deadline = time.monotonic() + within
    conn = await asyncpg.connect(primary_dsn, timeout=5)
    try:
        while True:
            rows = await conn.fetch(pgsql.statement("replication_state"))
            if any(
                r["application_name"] == STANDBY_NAME and r["sync_state"] == "sync" for r in rows
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby is not synchronous within {within:g}s: {rows}")
            await asyncio.sleep(0.1)  # stays: the interval of a bounded poll of the primary
    finally:
        await conn.close()


async def _sync_on(primary_dsn: str) -> None:
    conn = await asyncpg.connect(primary_dsn, timeout=5)
    try:
        await conn.execute(pgsql.statement("settings_sync_standby_on"))
        await conn.fetchval(pgsql.statement("config_reload"))
    finally:
        await conn.close()


def start_pair(timeout: float = 60) -> Pair:
    """A running primary with a synchronous standby; raises RuntimeError where the
    machine cannot (``missing_tools()`` says why)."""
    why = missing_tools()
    if why is not None:
        raise RuntimeError(why)
    primary = testing.start_cluster()
    if primary is None:
        raise RuntimeError("could not start a throwaway PostgreSQL cluster")
    standby: testing.Cluster | None = None
    try:
        root = os.path.join(primary.root, "standby")
        os.mkdir(root)
        os.chmod(root, 0o755)
        if primary.user is not None:
            shutil.chown(root, user=primary.user)
        data = os.path.join(root, "data")
        # initdb's default pg_hba.conf trusts replication connections from 127.0.0.1.
        primary._run(
            os.path.join(primary.bindir, "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            data,
            "-X",
            "stream",
            "-R",
            "--no-sync",
            "-d",
            f"application_name={STANDBY_NAME}",
        )
        standby = testing.Cluster(primary.bindir, root, free_port(), primary.user)
        standby.start()
        asyncio.run(_sync_on(primary.dsn))
        asyncio.run(_wait_sync(primary.dsn, timeout))
    except BaseException as exc:
        if standby is not None:
            standby.stop("immediate")
        primary.destroy()
        if isinstance(exc, subprocess.CalledProcessError):
            out = (exc.stderr or b"").decode(errors="replace").strip()
            raise RuntimeError(f"building the standby failed: {out or exc}") from None
        raise
    return Pair(primary, standby)
