"""What every dashboard handler shares: its state (``Dashboard``), building links,
rendering a page or a JSON answer, the guards around pages, API answers and actions
(one authentication check, one mapping of errors to answers), reading query parameters
(the status filter among them), and the actions on jobs (``JOB_ACTIONS``: label and
call). The pages, the actions and the API import this module; it imports none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import unquote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from venturi import admin
from venturi.db.errors import DATABASE_ERRORS, one_line
from venturi.errors import ConfigError, VenturiError
from venturi.formatting import to_json
from venturi.groups import check_group
from venturi.status import STATUSES
from venturi.web import flash
from venturi.web.auth import CSRF_COOKIE, CSRF_FIELD, Guard, new_nonce
from venturi.web.database import Database

# The most rows the API's job list returns at once.
MAX_LIMIT = 500
# The theme a browser chose with the toggle (venturi.js writes it; none: the system's).
THEME_COOKIE = "venturi_theme"
THEMES = ("light", "dark")


class JobAction(NamedTuple):
    """An action on jobs: its button's label, and the ``venturi.admin`` call that does it
    on a list of ids (``operator=`` and ``schema=`` by keyword)."""

    label: str
    act: Callable[..., Awaitable[list[admin.Change]]]


# The actions on jobs, by the name in their URL and form: one job's page, the list's
# selection and every job of a filter offer the same ones.
JOB_ACTIONS = {
    "retry": JobAction("Retry", admin.retry_jobs),
    "cancel": JobAction("Cancel", admin.cancel_jobs),
    "delete": JobAction("Delete", admin.delete_jobs),
    "run-now": JobAction("Run now", admin.run_now_jobs),
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


def set_cookie(
    response: Response, request: Request, name: str, value: str, max_age: int | None = None
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=root_path(request) + "/",
    )


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page, with this browser's CSRF token in its forms (and its nonce cookie set)."""
    d = dashboard(request)
    nonce = request.cookies.get(CSRF_COOKIE)
    fresh = not nonce
    if fresh:
        nonce = new_nonce()
    assert nonce is not None
    shown = flash.decode(request.cookies.get(flash.FLASH_COOKIE), d.guard.csrf_key)
    theme = request.cookies.get(THEME_COOKIE)
    html = d.env.get_template(template).render(
        request=request,
        flash=shown,
        theme=theme if theme in THEMES else None,
        csrf=d.guard.csrf_token(nonce, request.cookies),
        csrf_field=CSRF_FIELD,
        read_only=d.read_only,
        logged_in=d.guard.token is not None and signed_in(request, d),
        url=functools.partial(url, request),
        now=datetime.now(UTC),
        **{"back": here(request), **context},
    )
    response = HTMLResponse(html, status)
    if fresh:
        set_cookie(response, request, CSRF_COOKIE, nonce)
    if flash.FLASH_COOKIE in request.cookies:
        response.delete_cookie(flash.FLASH_COOKIE, path=root_path(request) + "/")
    return response


def root_path(request: Request) -> str:
    """The mount's prefix ('' at the root)."""
    return str(request.scope.get("root_path") or "")


# The longest path a page of the dashboard sends a form back to: a kind and a group search
# of 200 characters each, four UTF-8 bytes a character percent-encoded (2,400 each), and
# the page's other parameters. At 2,000, the Pause of a group named with 200 emoji sent
# the browser to the overview instead of back to its page.
MAX_BACK = 8000


def safe_path(request: Request, target: object, default: str = "overview") -> str:
    """``target`` if it is a path of this dashboard (never another site), else the
    page ``default``: where a login or an action sends the browser next."""
    root = root_path(request)
    if (
        isinstance(target, str)
        and len(target) <= MAX_BACK
        and target.startswith(root + "/")
        and not target.startswith("//")
        and "\\" not in target
        and all(c.isprintable() for c in target)
        and not _dot_segments(target)
    ):
        return target
    return url(request, default)


def _dot_segments(target: str) -> bool:
    """Whether the path of ``target`` holds a ``.`` or ``..`` segment, percent-encoded or
    not (a browser resolves ``/jobs-admin/%2e%2e/x`` to ``/x``: out of the mount)."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    for _ in range(4):  # encoded again and again: the decoded form is checked too
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return any(part in (".", "..") for part in path.split("/"))


def redirect_back(request: Request, form: Any, shown: flash.Flash) -> Response:
    """303 to the page the form came from (its ``back`` field), which shows ``shown``."""
    d = dashboard(request)
    response = RedirectResponse(safe_path(request, form.get("back")), 303)
    set_cookie(response, request, flash.FLASH_COOKIE, flash.encode(shown, d.guard.csrf_key))
    return response


def json_response(value: Any, status: int = 200) -> Response:
    """The command line's ``--json`` form of ``value``."""
    return Response(to_json(value) + "\n", status, media_type="application/json")


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status, status_code=status, message=message)


# What answers 503: the database failed, or venturi refused it (a schema not applied).
UNAVAILABLE = (*DATABASE_ERRORS, VenturiError)

Handler = Callable[[Request, Dashboard], Awaitable[Response]]


def here(request: Request) -> str:
    """This request's path and query: where a form sends the browser back to."""
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    return target


def signed_in(request: Request, d: Dashboard) -> bool:
    """The request carries the token (a bearer header or the login's cookie), or the
    dashboard has none."""
    return d.guard.authenticated(request.headers, request.cookies)


# How a kind of handler shows a refusal or a failure: (request, status, message).
ErrorAnswer = Callable[[Request, int, str], Response]


def json_error(request: Request, status: int, message: str) -> Response:
    """The API's refusal or failure: ``{"error": message}`` (a 401 asks for the token)."""
    response = json_response({"error": message}, status)
    if status == 401:
        response.headers["www-authenticate"] = "Bearer"
    return response


def nul_field(items: Iterable[tuple[str, Any]]) -> str | None:
    """The first field whose text holds a NUL character, which PostgreSQL's text cannot
    hold: a filter with one (``/jobs?kind=%00``) reached the database, which refused
    it, and the dashboard answered 503, "database error"."""
    return next((k for k, v in items if isinstance(v, str) and "\x00" in v), None)


async def answer(
    request: Request,
    call: Callable[[], Awaitable[Response]],
    error: ErrorAnswer,
    fields: Iterable[tuple[str, Any]] = (),
) -> Response:
    """``call()``'s response; for every handler alike, bad input answers 400 and a failed
    database (or a schema not applied) 503, as ``error`` shows them. ``fields``: a
    form's, checked with the query's."""
    if (name := nul_field([*request.query_params.multi_items(), *fields])) is not None:
        return error(request, 400, f"{name} holds a NUL character")
    try:
        return await call()
    except (BadInput, ConfigError) as exc:
        return error(request, 400, str(exc))
    except UNAVAILABLE as exc:
        return error(request, 503, f"database error: {one_line(exc)}")


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A GET that renders HTML: unauthenticated browsers are sent to /login."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not signed_in(request, d):
            if request.headers.get("hx-request"):
                return Response("log in again", 401)  # htmx leaves the page as it is
            return RedirectResponse(url(request, "login", {"next": here(request)}), 303)
        return await answer(request, lambda: handler(request, d), error_page)

    return endpoint


def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A JSON GET: 401 without the token, 400 on bad input, 503 when the database fails."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not signed_in(request, d):
            return json_error(request, 401, "authentication required")
        return await answer(request, lambda: handler(request, d), json_error)

    return endpoint


def action(handler: Callable[[Request, Dashboard, Any], Awaitable[Response]]) -> Any:
    """A POST that changes something: authenticated, refused in read-only mode, and only
    with this browser's CSRF token; each refusal answers before anything is read or
    written."""

    async def endpoint(request: Request) -> Response:
        d = dashboard(request)
        if not signed_in(request, d):
            return error_page(request, 401, "log in first")
        if d.read_only:
            return error_page(request, 403, "this dashboard is read-only")
        form = await request.form()
        if not d.guard.csrf_valid(form.get(CSRF_FIELD), request.cookies):
            return error_page(
                request, 403, "the form's CSRF token is missing or wrong: reload the page"
            )
        call = functools.partial(handler, request, d, form)
        return await answer(request, call, error_page, form.multi_items())

    return endpoint


def text_param(request: Request, name: str, max_len: int = 1000) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if len(value) > max_len:
        raise BadInput(f"{name} is longer than {max_len} characters")
    return value


def int_param(request: Request, name: str, *, low: int = 1, high: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    n = ascii_int(value, signed=True)
    if n is None:
        raise BadInput(f"{name} must be an integer, got {value[:40]!r}")
    if n < low or (high is not None and n > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise BadInput(f"{name} must be {bound}, got {n}")
    return n


def group_param(request: Request, name: str = "group") -> str | None:
    """A group of the query string, checked as a job's group is (``check_group``: an
    empty value is no filter; 201 characters or a control character answer 400)."""
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    return check_group(value, name, new=False)


def status_filter(value: str | None) -> str | None:
    """A list's status filter, from a query or a form: None (any status) or one of
    ``STATUSES``, else ``BadInput``."""
    if value is not None and value not in STATUSES:
        raise BadInput(f"status must be one of {', '.join(STATUSES)}, got {value[:40]!r}")
    return value


def filter_params(request: Request) -> dict[str, str | None]:
    """The job filter of the query string: status, kind, key, q (the search box)."""
    return {
        "status": status_filter(text_param(request, "status")),
        "kind": text_param(request, "kind"),
        "key": text_param(request, "key"),
        "q": text_param(request, "q", 200),
    }


def job_id_param(request: Request) -> int:
    raw = request.path_params["job_id"]
    n = ascii_int(raw)
    if n is None or not 0 < n < 2**63:
        raise BadInput(f"a job id is a positive integer, got {raw[:40]!r}")
    return n


def ascii_int(value: object, *, signed: bool = False) -> int | None:
    """``value``'s integer if it is ASCII digits only (a ``-`` first when ``signed``),
    else None: ``int()`` also takes other scripts' digits (``٣``), underscores and
    surrounding spaces, and ``str.isdigit`` superscripts."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    digits = value[1:] if signed and value.startswith("-") else value
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(value)


def action_named(name: str) -> JobAction:
    """The action on jobs called ``name`` (a URL's, a form's or a query's), else
    ``BadInput``."""
    if name not in JOB_ACTIONS:
        raise BadInput(f"action must be one of {', '.join(JOB_ACTIONS)}, got {name[:40]!r}")
    return JOB_ACTIONS[name]
