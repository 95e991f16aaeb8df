"""The dashboard's ASGI application (``venturi.web.app`` builds it here): its routes, its
templates' environment, the security headers on every response.

Every link is built from the request (``url_for`` and the mount's root path), so the app
works at ``/`` under ``venturi web`` and under any prefix of a host application.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from venturi import validate
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA
from venturi.web import filters, routes
from venturi.web.auth import Guard
from venturi.web.database import Database
from venturi.web.hosts import HostGuard, check_allowed_hosts
from venturi.web.kit import Dashboard, default_operator

# script-src 'self': htmx and nothing inline; style-src 'self': no style attributes
# either. Forms post only to the dashboard, and no other site may frame it.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


class SecurityHeadersMiddleware:
    """CSP and friends on every response; pages and API answers are never cached."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith((scope.get("root_path") or "") + "/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in SECURITY_HEADERS.items():
                    headers.setdefault(k, v)
                if not static:
                    headers.setdefault("cache-control", "no-store")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class DashboardApp(Starlette):
    """Starlette with the security headers outside its error middleware too, so that a
    500 carries them as every other answer does."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeadersMiddleware(super().build_middleware_stack())


def _environment() -> jinja2.Environment:
    root = resources.files("venturi.web") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    filters.install(env)
    return env


def create_app(
    pool_or_dsn: Any,
    *,
    token: str | None = None,
    read_only: bool = False,
    schema: str = DEFAULT_SCHEMA,
    operator: Callable[[Request], str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
) -> Starlette:
    if not isinstance(read_only, bool):
        raise ConfigError(f"read_only must be True or False, got {validate.shown(read_only)}")
    if operator is not None and not callable(operator):
        raise ConfigError(
            f"operator must be a callable taking the request, got {validate.shown(operator)}"
        )
    if not isinstance(pool_or_dsn, str) and not hasattr(pool_or_dsn, "acquire"):
        raise ConfigError(
            f"pool_or_dsn must be a DSN or an asyncpg Pool, got {validate.shown(pool_or_dsn)}"
        )
    guard = Guard.create(token)
    allowed = check_allowed_hosts(allowed_hosts, guard.token)
    db = Database(pool_or_dsn, schema)
    state = Dashboard(db, guard, read_only, operator or default_operator, _environment())

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        yield
        await db.close()

    static = StaticFiles(packages=[("venturi.web", "static")])
    app = DashboardApp(
        routes=[*routes.ROUTES, Mount("/static", static, name="static")],
        lifespan=lifespan,
    )
    app.state.dashboard = state
    app.add_middleware(HostGuard, allowed=allowed)
    return app
