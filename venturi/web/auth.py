"""Who may use the dashboard, and proof that a POST came from its own pages.

With a token, a request is authenticated by ``Authorization: Bearer <token>`` or by the
session cookie the login form sets: a random id and its issue time, signed with a key
derived from the token (the cookie jar never holds the token itself), refused past
``SESSION_MAX_AGE`` or once logged out in this process (``Sessions``). Without a token
every request is let in: serve on loopback only.

CSRF: each browser gets a random nonce in an HttpOnly, SameSite=Strict cookie; a form
carries ``HMAC(key, nonce | session)``. A forged cross-site POST cannot read the cookie
nor compute the HMAC, and a token from another browser or another session fails. The
key derives from the dashboard token, so several processes serving one token accept each
other's forms; without a token it is random per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from venturi.errors import ConfigError

SESSION_COOKIE = "venturi_session"
CSRF_COOKIE = "venturi_csrf"
CSRF_FIELD = "csrf"
# How long a login lasts (seconds): its cookie's Max-Age, and the age past which its
# session is refused whatever the browser sends.
SESSION_MAX_AGE = 12 * 3600
# The most logged-out sessions a process remembers until they expire; past it the
# soonest to expire are forgotten first (each a few dozen bytes).
MAX_ENDED = 10_000


# The shortest token accepted: 16 characters of `openssl rand -hex 32`'s 64 still hold 64
# bits; a shorter one can be guessed (failed logins are only slowed down, see Logins).
MIN_TOKEN = 16


def check_token(token: object) -> str | None:
    """``token`` if it can be a dashboard token (None: no authentication), else ConfigError."""
    if token is None:
        return None
    if (
        not isinstance(token, str)
        or not token
        or token != token.strip()
        or not token.isascii()
        or not token.isprintable()
    ):
        raise ConfigError(
            "token must be a non-empty string of printable ASCII without surrounding "
            "spaces (e.g. the output of `openssl rand -hex 32`)"
        )
    if len(token) < MIN_TOKEN:
        raise ConfigError(
            f"token must be at least {MIN_TOKEN} characters, got {len(token)} "
            "(e.g. the output of `openssl rand -hex 32`)"
        )
    return token


def _mac(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


class Sessions:
    """The login sessions of one token: ``<id>.<issued>.<mac>``, signed with ``key``;
    those logged out here are remembered until they would have expired."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.ended: dict[str, float] = {}
        self.clock: Callable[[], float] = time.time

    def new(self) -> str:
        body = f"{secrets.token_urlsafe(18)}.{int(self.clock())}"
        return f"{body}.{_mac(self.key, body)}"

    def _issued(self, value: str) -> tuple[str, float] | None:
        """The id and issue time of a session signed here, else None."""
        sid, _, rest = value.partition(".")
        issued, _, mac = rest.partition(".")
        if not sid or not issued.isascii() or not issued.isdigit() or len(issued) > 12:
            return None
        if not hmac.compare_digest(mac.encode(), _mac(self.key, f"{sid}.{issued}").encode()):
            return None
        return sid, float(issued)

    def valid(self, value: str) -> bool:
        got = self._issued(value)
        if got is None:
            return False
        sid, issued = got
        age = self.clock() - issued
        return -60 <= age < SESSION_MAX_AGE and sid not in self.ended

    def end(self, value: str | None) -> None:
        """Log ``value`` out in this process (nothing if it is no valid session)."""
        if value is None or not self.valid(value):
            return
        sid, issued = self._issued(value) or ("", 0.0)
        now = self.clock()
        for old in [k for k, until in self.ended.items() if until <= now]:
            del self.ended[old]
        while len(self.ended) >= MAX_ENDED:
            del self.ended[min(self.ended, key=self.ended.__getitem__)]
        self.ended[sid] = issued + SESSION_MAX_AGE


class Logins:
    """Failed logins per client address: after ``free`` of them in a row, that client's
    next login is refused for 1 s, doubling with each further failure up to
    ``max_wait``; a success forgets it. At most ``max_clients`` addresses are kept (the
    oldest forgotten first)."""

    free = 5
    max_wait = 60.0
    max_clients = 4096

    def __init__(self) -> None:
        # address -> (failures in a row, time before which its logins are refused)
        self.failures: dict[str, tuple[int, float]] = {}
        self.clock: Callable[[], float] = time.time

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may try again (0: now)."""
        _, until = self.failures.get(client, (0, 0.0))
        return max(0.0, until - self.clock())

    def failed(self, client: str) -> None:
        count, _ = self.failures.pop(client, (0, 0.0))
        count += 1
        over = count - self.free  # 0 at the last free failure: locked for 1 s
        until = self.clock() + min(self.max_wait, 2.0**over) if over >= 0 else 0.0
        while len(self.failures) >= self.max_clients:
            del self.failures[next(iter(self.failures))]
        self.failures[client] = (count, until)

    def succeeded(self, client: str) -> None:
        self.failures.pop(client, None)


@dataclass(frozen=True)
class Guard:
    """The dashboard's token (None: open) and the key of its CSRF tokens."""

    token: str | None
    csrf_key: bytes = field(repr=False, default=b"")
    sessions: Sessions = field(repr=False, default_factory=lambda: Sessions(b""))
    logins: Logins = field(repr=False, default_factory=Logins)

    @classmethod
    def create(cls, token: str | None) -> Guard:
        checked = check_token(token)
        if checked is None:
            return cls(None, secrets.token_bytes(32))

        def key(purpose: bytes) -> bytes:
            return hmac.new(checked.encode(), purpose, "sha256").digest()

        return cls(checked, key(b"venturi web csrf"), Sessions(key(b"venturi web sessions")))

    def authenticated(self, headers: Any, cookies: dict[str, str]) -> bool:
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token.encode()
        ):
            return True
        session = cookies.get(SESSION_COOKIE)
        return session is not None and self.sessions.valid(session)

    def token_matches(self, given: str) -> bool:
        """The login form's check."""
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_token(self, nonce: str, cookies: dict[str, str]) -> str:
        """The form token of this browser (its nonce) and session."""
        return _mac(self.csrf_key, f"{nonce}|{cookies.get(SESSION_COOKIE, '')}")

    def csrf_valid(self, given: object, cookies: dict[str, str]) -> bool:
        nonce = cookies.get(CSRF_COOKIE)
        if not nonce or not isinstance(given, str) or not given:
            return False
        return hmac.compare_digest(given.encode(), self.csrf_token(nonce, cookies).encode())


def new_nonce() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (``venturi web`` refuses any
    other address without a token)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
