"""Fixtures: a real PostgreSQL (found or started once per session) and a fresh database
per test, cloned from a migrated template; SQL snapshots in the top-level snapshots/."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import settings
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tests.chaos.proxy import Proxy
from tests.support import alone
from tests.support.cli import ROOT
from venturi import testing
from venturi.tasks import registered, unregister

# Hypothesis's default 200 ms per-example deadline is a timing assertion a loaded CI
# machine can break; an example that hangs is still caught by the test's own deadlines.
settings.register_profile("venturi", deadline=None)
settings.load_profile("venturi")


class SQLSnapshot(SingleFileSnapshotExtension):
    """One .sql file per snapshot, under the repository's top-level snapshots/ folder."""

    _write_mode = WriteMode.TEXT
    file_extension = "sql"

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(ROOT / "snapshots" / test_location.basename)


@pytest.fixture
def sql_snapshot(snapshot: Any) -> Any:
    return snapshot.use_extension(SQLSnapshot)


# One fixture stack: the server, the template and the per-test databases are venturi's
# own pytest plugin's (venturi/pytest_plugin.py), the ones an application's tests get;
# the short names below are what this suite's tests ask for. The plugin's fixtures are
# synchronous (their database work runs on a private loop in a thread), so they serve
# async tests and async fixtures such as ``conn`` alike.


@pytest.fixture(scope="session")
def pg_admin_dsn(venturi_postgres: str) -> str:
    """An admin DSN: VENTURI_TEST_DSN, 127.0.0.1:5432, a throwaway cluster, or embedded."""
    return venturi_postgres


@pytest.fixture(scope="session")
def db_factory(venturi_databases: testing.DatabaseFactory) -> testing.DatabaseFactory:
    """Makes the per-test databases from the session's migrated template."""
    return venturi_databases


@pytest.fixture
def dsn(venturi_dsn: str) -> str:
    """A DSN of a database of this test's own, schema applied."""
    return venturi_dsn


@pytest.fixture
async def empty_dsn(db_factory: testing.DatabaseFactory) -> AsyncIterator[str]:
    """A DSN of a database of this test's own with no schema at all."""
    url = await db_factory.create_empty()
    yield url
    await db_factory.release(url)


@pytest.fixture
async def conn(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(dsn)
    yield c
    await c.close()


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    p = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    yield p
    await p.close()


@pytest.fixture
def kinds() -> Iterator[list[str]]:
    """Kinds a test declares: forgotten again after the test so names can repeat."""
    before = set(registered())
    yield []
    for k in set(registered()) - before:
        unregister(k)


# Every skip in this suite means a real part is missing on the machine (Chromium,
# pgbouncer, psql, initdb/pg_ctl/pg_basebackup): fine on a laptop, never in CI. .ci/run
# sets VENTURI_TEST_REQUIRE_ALL=1, and then a skip is reported as a failure, its reason
# kept, so that CI cannot pass with part of the suite silently not run.
REQUIRE_ALL = os.environ.get("VENTURI_TEST_REQUIRE_ALL") == "1"

# The one kind of skip that is no missing part: what an interpreter cannot have. Each is a
# reason a test's skipif gives word for word; nothing installs it on that Python.
PYTHON_LACKS = ("pgserver (the embedded extra) has no wheel for 3.13",)


# The long soaks (the chaos soak and the fault scenarios, about two and a half minutes
# together) are marked ``soak`` and left out of the suite unless ``--soak`` is given:
# the README's test command stays short, and .ci/run runs them once, after the suite,
# with ``--soak -m soak``. Deselected, not skipped: nothing is missing.
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        help="also run the tests marked soak (the chaos soak and the fault scenarios)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--soak"):
        kept: list[pytest.Item] = []
        soaks: list[pytest.Item] = []
        for item in items:
            (soaks if item.get_closest_marker("soak") is not None else kept).append(item)
        if soaks:
            config.hook.pytest_deselected(items=soaks)
            items[:] = kept
    # The tests that run alone (tests/support/alone.py) go last, in their own order: a
    # serial phase at the end of the run instead of pauses of every worker all through it.
    items.sort(key=alone.is_serial)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """In a parallel run, a serial test runs while no other test runs (setup and teardown
    included), and an ordinary test while no serial one does: tests/support/alone.py."""
    turns = item.config.stash.get(TURNS, None)
    if turns is None:
        yield
        return
    keep = nextitem is not None and alone.is_serial(nextitem)
    with turns.hold(alone.is_serial(item), keep=alone.is_serial(item) and keep):
        yield


TURNS = pytest.StashKey["alone.Turns | None"]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TURNS] = alone.turns(config)
    # The commands tests run write to pipes, where the CLI draws its tables 160 columns
    # wide unless COLUMNS says otherwise (venturi/cli/common.py). Most tests hand their
    # own environment on to those commands, so a COLUMNS from the shell made what a table
    # shows depend on where the suite ran; and pytest-xdist's workers are started with
    # COLUMNS=80 and LINES=24 in theirs, which cut `jobs list`'s error column short
    # (test_django's `Refused: no stock`). A test that wants a width passes COLUMNS itself.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


def pytest_report_header(config: Any) -> str:
    return (
        f"venturi test database: VENTURI_TEST_DSN={'set' if os.environ.get('VENTURI_TEST_DSN') else 'unset'}"
        f"; VENTURI_TEST_REQUIRE_ALL={'1' if REQUIRE_ALL else 'unset'}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if any(lack in reason for lack in PYTHON_LACKS):
            return
        report.outcome = "failed"
        report.longrepr = f"skipped, and VENTURI_TEST_REQUIRE_ALL=1 forbids skips: {reason}"


@pytest.fixture
async def proxy(pg_admin_dsn: str) -> AsyncIterator[Proxy]:
    """The chaos harness's TCP proxy (tests/chaos/proxy.py) in front of the test server:
    delay, black-hole, drop or reset the connections made through ``proxy.dsn(dsn)``."""
    parts = urllib.parse.urlsplit(pg_admin_dsn)
    p = await Proxy.start(parts.hostname or "127.0.0.1", parts.port or 5432, seed=1)
    try:
        yield p
    finally:
        await p.close()
