"""What every benchmark shares: the admin DSN option, a scratch database, the log, the
median and percentiles, what a run records of its provenance (the commit, the versions,
the machine) and how it saves its figures.

A scratch database is created and dropped through venturi's own database statements
(``venturi.db.databases``: the ``sql_templates/database`` templates, the name validated
and quoted), never by SQL text written here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg

from venturi.db import databases
from venturi.testing.server import with_database

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
ADMIN_DSN_HELP = "an admin DSN (VENTURI_BENCH_DSN); the run creates and drops its own databases"
# The packages whose versions a run records.
PACKAGES = (
    "venturi",
    "procrastinate",
    "pgqueuer",
    "chancy",
    "dbos",
    "oban",
    "asyncpg",
    "psycopg",
    "uvloop",
    "msgspec",
)


def add_dsn_option(parser: argparse.ArgumentParser) -> None:
    """``--dsn``: the admin DSN, from ``VENTURI_BENCH_DSN`` or the local server."""
    parser.add_argument(
        "--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN), help=ADMIN_DSN_HELP
    )


async def create_database(admin_dsn: str, name: str) -> str:
    """A new, empty database ``name`` (one left by an earlier run is dropped first); its
    DSN."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        await databases.database_drop(admin, name=name)
        await databases.database_create(admin, name=name)
    finally:
        await admin.close()
    return with_database(admin_dsn, name)


async def drop_database(admin_dsn: str, name: str) -> None:
    """Drop ``name``, disconnecting whatever still uses it."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        await databases.database_drop(admin, name=name)
    finally:
        await admin.close()


@asynccontextmanager
async def scratch_database(admin_dsn: str, name: str) -> AsyncIterator[str]:
    """A database of the run's own, as its DSN; dropped at the end, whatever happens."""
    dsn = await create_database(admin_dsn, name)
    try:
        yield dsn
    finally:
        await drop_database(admin_dsn, name)


def log(msg: str, tag: str = "") -> None:
    """A progress line on stderr (stdout holds the results), with a clock if tagged."""
    prefix = f"[{tag} {time.strftime('%H:%M:%S')}] " if tag else ""
    print(prefix + msg, file=sys.stderr, flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def fmt(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators, or "-" for none (or NaN)."""
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"


def versions() -> dict[str, str]:
    """The installed version of each package a run involves ("-" if absent)."""
    out = {}
    for pkg in PACKAGES:
        try:
            # venturi is distributed as venturi-jobs (the name venturi is another project's).
            out[pkg] = metadata.version("venturi-jobs" if pkg == "venturi" else pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "-"
    return out


def git_head() -> str:
    """The commit measured, with ``+dirty venturi/`` when the package has changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "venturi"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("+dirty venturi/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        # A copy outside git (say, a snapshot of one commit): the caller may name it.
        return os.environ.get("VENTURI_BENCH_REV", "?")


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def write_json(path: str, payload: Any) -> None:
    """``payload`` as indented JSON at ``path`` (its folder made if need be)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n")


def save_run(path: str, result: Any, text: str) -> None:
    """A run's figures as JSON at ``path`` and its printed summary beside it (``.txt``)."""
    write_json(path, result)
    Path(path).with_suffix(".txt").write_text(text + "\n")


def run(main: Any, loop: str = "uvloop") -> Any:
    """Run the coroutine ``main`` on ``loop`` (``uvloop`` or ``asyncio``)."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    import asyncio

    return asyncio.run(main)
