"""venturi's pytest plugin: a migrated throwaway database per test.

Installed with venturi as the ``venturi`` ``pytest11`` entry point, so pytest loads it by
itself. Fixtures:

- ``venturi_dsn``: the DSN of a database of this test's own, the venturi schema applied
  (cloned from a migrated template: tens of milliseconds), dropped after the test with
  the next few (``testing.databases.DROP_BATCH``: drops sent together share the
  server's checkpoint);
- ``venturi_schema``: the schema name, ``venturi``; override it in a conftest to test
  another schema;
- ``venturi_postgres``: the server's admin DSN, found once per session: ``VENTURI_TEST_DSN``
  if set, else a server on 127.0.0.1:5432, else a throwaway cluster from the machine's
  PostgreSQL binaries, else the embedded server (``venturi-jobs[embedded]``).

The fixtures are synchronous, so they serve plain and async tests alike, with or without
pytest-asyncio; their database work runs on a private event loop in a helper thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from venturi import testing
from venturi.sql import DEFAULT_SCHEMA

T = TypeVar("T")


def _blocking(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` to completion on a fresh event loop in another thread, leaving the
    calling thread's event loop (pytest-asyncio's, say) untouched."""

    async def main() -> T:
        return await fn()

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="venturi-fixture") as pool:
        return pool.submit(asyncio.run, main()).result()


@pytest.fixture(scope="session")
def venturi_schema() -> str:
    """The schema the test databases get; override to test another one."""
    return DEFAULT_SCHEMA


@pytest.fixture(scope="session")
def venturi_postgres() -> Iterator[str]:
    """An admin DSN of a PostgreSQL server, found (or started) once per session."""
    with testing.postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def venturi_databases(
    venturi_postgres: str, venturi_schema: str
) -> Iterator[testing.DatabaseFactory]:
    """Makes the per-test databases from a template migrated once per session."""
    factory = testing.DatabaseFactory(venturi_postgres, venturi_schema)
    _blocking(factory.setup)
    yield factory
    _blocking(factory.teardown)


@pytest.fixture
def venturi_dsn(venturi_databases: testing.DatabaseFactory) -> Iterator[str]:
    """A DSN of a database of this test's own, the venturi schema applied."""
    dsn = _blocking(venturi_databases.create)
    yield dsn
    _blocking(lambda: venturi_databases.release(dsn))
