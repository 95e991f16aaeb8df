"""Which names in the Host header the dashboard answers (DNS rebinding).

A page of ``attacker.example`` whose name the attacker rebinds to 127.0.0.1 is, to the
browser, same-origin with a dashboard on this machine: its requests reach it, carrying
``Host: attacker.example``. Without a token nothing else stops them, so by default a
dashboard without a token answers only this machine's names (``localhost``,
``*.localhost``, loopback addresses); with a token any name (a rebound page has neither
the token nor the login cookie, which its browser keeps for the real name).
``allowed_hosts`` names more, or ``"*"`` for any; the loopback names are always served.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from venturi import validate
from venturi.errors import ConfigError

ANY = "*"
# A DNS name (letters, digits, hyphens, dots, underscores) or an IP address, no port.
_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]{0,252})")


def normal(host: str) -> str:
    """``host`` (a Host header or an allowed name) without its port, brackets, case
    or final dot."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def is_loopback_name(host: str) -> bool:
    """``localhost``, a name under it (RFC 6761: browsers resolve them to loopback) or
    a loopback address."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allowed_hosts(allowed_hosts: object, token: str | None) -> frozenset[str] | None:
    """The names served besides the loopback ones (None: any), else ConfigError."""
    if allowed_hosts is None:
        return None if token is not None else frozenset()
    if isinstance(allowed_hosts, str) or not isinstance(allowed_hosts, Iterable):
        raise ConfigError(
            "allowed_hosts must be a list of host names or addresses (or ['*']), got "
            f"{validate.shown(allowed_hosts)}"
        )
    names = set()
    for given in allowed_hosts:
        if given == ANY:
            return None
        name = _host_name(given)
        if name is None:
            raise ConfigError(
                "allowed_hosts: each must be a host name or an IP address without scheme "
                f"or port, or '*', got {validate.shown(given)}"
            )
        names.add(name)
    return frozenset(names)


def _host_name(given: object) -> str | None:
    """The normal form of an allowed host, or None if it is not a name nor an address."""
    if not isinstance(given, str) or not given.isascii():
        return None
    inner = given[1:-1] if given.startswith("[") and given.endswith("]") else given
    try:
        return str(ipaddress.ip_address(inner))
    except ValueError:
        pass
    name = given.lower().rstrip(".")
    return name if _NAME.fullmatch(name) else None


class HostGuard:
    """Answers 421, one line, to a request whose Host is not served."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = allowed

    def serves(self, host: str) -> bool:
        name = normal(host)
        try:
            name = str(ipaddress.ip_address(name))
        except ValueError:
            pass
        return self.allowed is None or is_loopback_name(name) or name in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed is None:
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.serves(raw):
            await self.app(scope, receive, send)
            return
        shown = validate.shown(raw[:100])
        body = (
            f"host {shown} is not served by this dashboard: it answers this machine's "
            "names and those of allowed_hosts (--allowed-host) only\n"
        ).encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": body})
