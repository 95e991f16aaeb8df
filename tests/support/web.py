"""The dashboard under test, in process: an httpx client on its ASGI app, and the CSRF
token a page carries (the web tests' shared pieces)."""

from __future__ import annotations

import re
from typing import Any

import httpx

# The token every page names in its <meta name="csrf-token">.
CSRF = re.compile(r'name="csrf-token" content="([0-9a-f]+)"')


def client(app: Any, **kw: Any) -> httpx.AsyncClient:
    """A client on ``app`` with no server between (``kw``: httpx's own, e.g. headers)."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", **kw
    )


async def csrf_of(c: httpx.AsyncClient, path: str) -> str:
    """The CSRF token of the page at ``path``, as ``c`` sees it (its session)."""
    r = await c.get(path)
    assert r.status_code == 200, r.text
    m = CSRF.search(r.text)
    assert m, "no CSRF field on the page"
    return m.group(1)
