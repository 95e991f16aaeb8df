"""The dashboard templates' filters and globals: ``duration``, ``clip``, ``pretty`` (the
JSON form), ``ago``, ``abs_time`` (a time with its zone), ``handler_traceback`` (a
handler's traceback without venturi's own frames on top) and ``exception_line`` (a
failure on one line: the exception it ended with, its whole message); ``shown_name``
(a group's name, quoted when it would not read as itself) and ``weight_shown``."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import jinja2

from venturi.errors import exception_line
from venturi.formatting import ago, clip, duration, shown_name, to_json, weight_shown

# A frame of venturi's own machinery around a handler (the executor, the middleware
# chain, tracing): what every handler's traceback starts with, and nothing to debug.
_INTERNAL = re.compile(r'^  File "[^"]*[/\\]venturi[/\\](runtime[/\\]|middleware\.py|tracing\.py)')
_HEADER = "Traceback (most recent call last):"


def abs_time(at: datetime | None, millis: bool = False) -> str:
    """``2026-12-01 21:03:05 UTC`` (``millis``: ``21:03:05.123``): an absolute time,
    its zone said."""
    if at is None:
        return "—"
    text = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (text[:-3] if millis else text[:-7]) + " UTC"


def handler_traceback(text: str) -> str:
    """``text`` with the venturi frames at the top of each traceback it holds removed
    (one line says how many), so the handler's own frame comes first."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        if lines[i].strip() != _HEADER:
            i += 1
            continue
        i += 1
        hidden = 0
        while i < len(lines) and _INTERNAL.match(lines[i]):
            hidden += 1
            i += 1
            # The frame's source lines (and carets) are indented deeper than "  File".
            while i < len(lines) and lines[i].startswith("    "):
                i += 1
        if hidden:
            out.append(f"  [{hidden} venturi frame{'s' if hidden > 1 else ''} hidden]")
    return "\n".join(out)


def install(env: jinja2.Environment) -> None:
    """Give ``env``'s templates the dashboard's filters and globals."""
    env.filters["duration"] = duration
    env.filters["clip"] = clip
    env.filters["shown_name"] = shown_name
    env.filters["weight_shown"] = weight_shown
    env.filters["pretty"] = to_json
    env.filters["abs_time"] = abs_time
    env.filters["handler_traceback"] = handler_traceback
    env.filters["exception_line"] = exception_line
    env.globals["ago"] = ago
