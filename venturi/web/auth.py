"""Who may use the dashboard, and proof that a POST came from its own pages.

With a token, a request is authenticated by ``Authorization: Bearer <token>`` or by the
session cookie the login form sets (an HMAC of the token, so the cookie jar never holds
the token itself). Without a token every request is let in: serve on loopback only.

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
from dataclasses import dataclass, field
from typing import Any

from venturi.errors import ConfigError

SESSION_COOKIE = "venturi_session"
CSRF_COOKIE = "venturi_csrf"
CSRF_FIELD = "csrf"


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
    return token


def _mac(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Guard:
    """The dashboard's token (None: open) and the key of its CSRF tokens."""

    token: str | None
    csrf_key: bytes = field(repr=False, default=b"")

    @classmethod
    def create(cls, token: str | None) -> Guard:
        checked = check_token(token)
        if checked is None:
            return cls(None, secrets.token_bytes(32))
        return cls(checked, hmac.new(checked.encode(), b"venturi web csrf", "sha256").digest())

    @property
    def session_value(self) -> str:
        """The session cookie's value: derived from the token, never the token."""
        assert self.token is not None
        return _mac(self.token.encode(), "venturi web session")

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
        return session is not None and hmac.compare_digest(
            session.encode(), self.session_value.encode()
        )

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
