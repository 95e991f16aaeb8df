"""The dashboard's ASGI application (``venturi.web.app`` builds it here): routes, the guard around them, rendering, headers.

Every link is built from the request (``url_for`` and the mount's root path), so the app
works at ``/`` under ``venturi web`` and under any prefix of a host application.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from venturi import views
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA
from venturi.web.auth import CSRF_COOKIE, CSRF_FIELD, Guard, new_nonce
from venturi.web.queries import DATABASE_ERRORS, Database

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


def default_operator(request: Request) -> str:
    """The journal's worker column for a dashboard action: ``web:<client address>``."""
    host = request.client.host if request.client else "?"
    return f"web:{host}"


@dataclass
class Dashboard:
    """What every handler needs; kept in ``app.state.dashboard``."""

    db: Database
    guard: Guard
    read_only: bool
    operator: Callable[[Request], str]
    env: jinja2.Environment


class BadInput(Exception):
    """A query or form value the dashboard refuses: 400 with the message."""


def dashboard(request: Request) -> Dashboard:
    d: Dashboard = request.app.state.dashboard
    return d


def url(request: Request, name: str, query: dict[str, Any] | None = None, **params: Any) -> str:
    """The path of route ``name`` under the mount, with the query's non-empty values."""
    path = request.url_for(name, **{k: str(v) for k, v in params.items()}).path
    if query:
        kept = {k: v for k, v in query.items() if v not in (None, "")}
        if kept:
            path += "?" + urlencode(kept)
    return path


def _cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=(request.scope.get("root_path") or "") + "/",
    )


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page, with this browser's CSRF token in its forms (and its nonce cookie set)."""
    d = dashboard(request)
    nonce = request.cookies.get(CSRF_COOKIE)
    fresh = not nonce
    if fresh:
        nonce = new_nonce()
    assert nonce is not None
    html = d.env.get_template(template).render(
        request=request,
        csrf=d.guard.csrf_token(nonce, request.cookies),
        csrf_field=CSRF_FIELD,
        read_only=d.read_only,
        logged_in=d.guard.token is not None
        and d.guard.authenticated(request.headers, request.cookies),
        url=functools.partial(url, request),
        now=datetime.now(UTC),
        **context,
    )
    response = HTMLResponse(html, status)
    if fresh:
        _cookie(response, request, CSRF_COOKIE, nonce)
    return response


def json_response(value: Any, status: int = 200) -> Response:
    """The command line's ``--json`` form of ``value``."""
    return Response(views.to_json(value) + "\n", status, media_type="application/json")


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status, status_code=status, message=message)


Handler = Callable[[Request, Dashboard], Awaitable[Response]]


def _relative_target(request: Request) -> str:
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    return target


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A GET that renders HTML: unauthenticated browsers are sent to /login."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not d.guard.authenticated(request.headers, request.cookies):
            if request.headers.get("hx-request"):
                return Response("log in again", 401)  # htmx leaves the page as it is
            return RedirectResponse(url(request, "login", {"next": _relative_target(request)}), 303)
        try:
            return await handler(request, d)
        except (BadInput, ConfigError) as exc:
            return error_page(request, 400, str(exc))
        except DATABASE_ERRORS as exc:
            return error_page(request, 503, f"database error: {_one_line(exc)}")

    return endpoint


def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A JSON GET: 401 without the token, 400 on bad input, 503 when the database fails."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not d.guard.authenticated(request.headers, request.cookies):
            response = json_response({"error": "authentication required"}, 401)
            response.headers["www-authenticate"] = "Bearer"
            return response
        try:
            return await handler(request, d)
        except (BadInput, ConfigError) as exc:
            return json_response({"error": str(exc)}, 400)
        except DATABASE_ERRORS as exc:
            return json_response({"error": f"database error: {_one_line(exc)}"}, 503)

    return endpoint


def action(handler: Callable[[Request, Dashboard, Any], Awaitable[Response]]) -> Any:
    """A POST that changes something: authenticated, refused in read-only mode, and only
    with this browser's CSRF token; each refusal answers before anything is read or
    written."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not d.guard.authenticated(request.headers, request.cookies):
            return error_page(request, 401, "log in first")
        if d.read_only:
            return error_page(request, 403, "this dashboard is read-only")
        form = await request.form()
        if not d.guard.csrf_valid(form.get(CSRF_FIELD), request.cookies):
            return error_page(
                request, 403, "the form's CSRF token is missing or wrong: reload the page"
            )
        try:
            return await handler(request, d, form)
        except (BadInput, ConfigError) as exc:
            return error_page(request, 400, str(exc))
        except DATABASE_ERRORS as exc:
            return error_page(request, 503, f"database error: {_one_line(exc)}")

    return endpoint


def _one_line(exc: BaseException) -> str:
    from venturi import db

    return db.errors.one_line(exc)


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


def _environment() -> jinja2.Environment:
    root = resources.files("venturi.web") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["duration"] = views.duration
    env.filters["clip"] = views.clip
    env.filters["pretty"] = views.to_json
    env.globals["ago"] = views.ago
    return env


def create_app(
    pool_or_dsn: Any,
    *,
    token: str | None = None,
    read_only: bool = False,
    schema: str = DEFAULT_SCHEMA,
    operator: Callable[[Request], str] | None = None,
) -> Starlette:
    from venturi.web import routes

    if not isinstance(read_only, bool):
        raise ConfigError(f"read_only must be True or False, got {read_only!r}")
    if operator is not None and not callable(operator):
        raise ConfigError(f"operator must be a callable taking the request, got {operator!r}")
    if not isinstance(pool_or_dsn, str) and not hasattr(pool_or_dsn, "acquire"):
        raise ConfigError(f"pool_or_dsn must be a DSN or an asyncpg Pool, got {pool_or_dsn!r}")
    db = Database(pool_or_dsn, schema)
    state = Dashboard(
        db, Guard.create(token), read_only, operator or default_operator, _environment()
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        yield
        await db.close()

    static = StaticFiles(packages=[("venturi.web", "static")])
    app = Starlette(
        routes=[*routes.ROUTES, Mount("/static", static, name="static")],
        lifespan=lifespan,
    )
    app.state.dashboard = state
    app.add_middleware(SecurityHeadersMiddleware)
    return app
