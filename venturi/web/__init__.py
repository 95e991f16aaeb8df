"""The web dashboard (``venturi web``; install the ``web`` extra).

``venturi.web.app(pool_or_dsn, token=..., read_only=..., schema=..., allowed_hosts=...)`` is an ASGI
application: serve it with uvicorn, or mount it under a prefix of a Starlette or FastAPI
application. Starlette is imported only when ``app`` is called, so ``import venturi``
never needs it, and the worker never imports this package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from venturi.sql import DEFAULT_SCHEMA

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request


def app(
    pool_or_dsn: Any,
    *,
    token: str | None = None,
    read_only: bool = False,
    schema: str = DEFAULT_SCHEMA,
    operator: Callable[[Request], str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
) -> Starlette:
    """The dashboard over an asyncpg Pool (yours, left open) or a DSN (a pool made on
    first use). With ``token`` every request must carry it (bearer header or the login
    cookie); ``read_only`` refuses every action; ``operator(request)`` names who acted in
    the journal (default ``web:<client address>``). ``allowed_hosts``: the names in the
    Host header served besides this machine's (``localhost``, loopback addresses), or
    ``["*"]`` for any; by default any with a token, none without (DNS rebinding)."""
    try:
        from venturi.web.asgi import create_app
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"the venturi dashboard needs the web extra (pip install 'venturi-jobs[web]'): {exc}"
        ) from exc
    return create_app(
        pool_or_dsn,
        token=token,
        read_only=read_only,
        schema=schema,
        operator=operator,
        allowed_hosts=allowed_hosts,
    )


__all__ = ["app"]
