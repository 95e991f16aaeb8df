"""A role beside the one that applied the schema, for the paths that need ownership."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.support.sql import statement as tsql

# role_not_owner.sql.j2's role.
NOT_OWNER = "venturi_test_not_owner"


async def not_owner_dsn(conn: Any, dsn: str) -> str:
    """``dsn`` as a login role that may do all a worker does in venturi's schema of the
    database ``conn`` is on but owns none of it (created if missing, granted there)."""
    await conn.execute(tsql("role_not_owner"))
    url = urlsplit(dsn)
    assert url.username is not None
    return urlunsplit(url._replace(netloc=url.netloc.replace(url.username, NOT_OWNER, 1)))
