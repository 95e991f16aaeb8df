"""The outcome of an action, carried across its redirect: every action answers 303 back
to the page it came from, which shows what was done once (a cookie the next page reads
and deletes), so no page is left at a POST URL and a reload repeats nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import msgspec

FLASH_COOKIE = "venturi_flash"
# How many of an action's messages the next page lists (a cookie holds about 4 kB).
MESSAGES_SHOWN = 8
MESSAGE_MAX = 240


class Flash(msgspec.Struct, frozen=True):
    """What an action did: its title, how many changes were done and refused, and the
    first messages (refusals first: they are what the operator must read)."""

    title: str
    done: int
    refused: int
    messages: list[str]
    more: int


def of_changes(title: str, changes: list[Any]) -> Flash:
    """The flash of a list of ``venturi.admin.Change``."""
    ordered = [c for c in changes if not c.done] + [c for c in changes if c.done]
    shown = [c.message[:MESSAGE_MAX] for c in ordered[:MESSAGES_SHOWN]]
    done = sum(1 for c in changes if c.done)
    return Flash(title[:MESSAGE_MAX], done, len(changes) - done, shown, len(changes) - len(shown))


def _sign(key: bytes, payload: str) -> str:
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()[:32]


def encode(flash: Flash, key: bytes) -> str:
    """The cookie value: the flash as JSON, base64url, with an HMAC so that nothing but
    this dashboard can write what its pages show as an action's outcome."""
    payload = base64.urlsafe_b64encode(msgspec.json.encode(flash)).decode()
    return f"{payload}.{_sign(key, payload)}"


def decode(value: str | None, key: bytes) -> Flash | None:
    """The flash of a cookie value; None if there is none or it is not ours."""
    if not value or "." not in value:
        return None
    payload, _, mac = value.rpartition(".")
    if not hmac.compare_digest(mac.encode(), _sign(key, payload).encode()):
        return None
    try:
        return msgspec.json.decode(base64.urlsafe_b64decode(payload), type=Flash)
    except (ValueError, msgspec.DecodeError, json.JSONDecodeError):
        return None
