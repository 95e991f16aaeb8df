"""Testing with venturi: a PostgreSQL to test against, one fresh database per test, and
``drain`` to run due jobs in-process.

The tiers, in order: a DSN from ``VENTURI_TEST_DSN``; a server already listening on
127.0.0.1:5432 (user postgres); a throwaway cluster started from PostgreSQL binaries on
the machine; the embedded PostgreSQL wheel. Each test then gets its own database cloned
from a template that has the schema applied, which takes a few tens of milliseconds.

Applications get the same through the pytest plugin (``venturi.pytest_plugin``, loaded
automatically once venturi is installed): the ``venturi_dsn`` fixture, and
``await venturi.testing.drain(venturi_dsn, tasks=[...])`` to enqueue, drain and assert.

``server`` finds or starts the server, ``databases`` makes the per-test databases,
``drain`` runs jobs; their names are importable from here.
"""

from venturi.testing.databases import DatabaseFactory
from venturi.testing.drain import drain
from venturi.testing.server import (
    LOCAL_DSN,
    Cluster,
    find_bindir,
    postgres_server,
    start_cluster,
    with_database,
)

# Importable from venturi.testing under this name before it became a package.
_find_bindir = find_bindir

__all__ = [
    "LOCAL_DSN",
    "Cluster",
    "DatabaseFactory",
    "drain",
    "find_bindir",
    "postgres_server",
    "start_cluster",
    "with_database",
]
