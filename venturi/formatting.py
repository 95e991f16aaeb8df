"""How an operator's values read as text, in a terminal and on the dashboard alike:
durations, relative times, long values clipped, and the JSON form every read offers
(``--json`` and the dashboard's API print the same document)."""

from __future__ import annotations

import shlex
import unicodedata
from datetime import datetime
from typing import Any

import msgspec


def to_json(value: Any) -> str:
    """The ``--json`` output: msgspec's JSON (RFC 3339 times), indented, one document."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h10m``, ``4d03h``; an em dash for None."""
    if seconds is None:
        return "—"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def window_label(seconds: float) -> str:
    """A window for a column header: ``1h``, ``1m``, ``10s``."""
    s = round(seconds)
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return f"{s}s"


def ago(at: datetime | None, now: datetime) -> str:
    """``12s ago`` / ``in 3m00s``, relative to ``now``."""
    if at is None:
        return "—"
    delta = (now - at).total_seconds()
    return f"{duration(delta)} ago" if delta >= 0 else f"in {duration(-delta)}"


# The most of one carry, result or traceback `jobs show` prints; the rest is cut, so a
# huge value (a carry that no longer decodes, say) cannot flood the terminal or a log.
# `--json` still prints every value whole, for scripts that ask for it.
SHOW_LIMIT = 4000


def clip(text: str, limit: int = SHOW_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and a line saying it was truncated."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n… truncated: {len(text)} characters in all "
        "(`venturi jobs show ID --json` prints everything)"
    )


def shown_name(name: str) -> str:
    """A group's name as an operator reads it: as it is, or its Python repr (quoted, its
    invisible characters escaped) when it would not read as itself: a space at an end
    or only spaces, a character that prints nothing or nothing visible (U+200B, U+FEFF,
    U+00A0, any that is not printable), or a quote first, so that a quoted form is always
    a repr. ``acme``, ``acme `` and ``acme\\u200b`` then read as three names."""
    if name.isprintable() and name == name.strip() and not name.startswith(("'", '"')):
        return name
    return repr(name)


# Characters that would act on a terminal, or print nothing where something is: the
# controls (ESC drives a terminal: a job key holding ESC[2J cleared the operator's
# screen), the invisible format characters (a right-to-left override reorders what
# follows) and the line and paragraph separators.
_UNSAFE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def terminal_safe(text: str, keep: str = "\n\t") -> str:
    """Free text from the database (an error, a reason, a journal's detail) as a
    terminal shows it: the characters of ``keep`` (its lines and tabs) kept, every other
    character of ``_UNSAFE_CATEGORIES`` escaped as Python writes it (``\\x1b``,
    ``\\u200b``). ``keep=""``: one line (``validate.shown``'s messages)."""
    if text.isprintable():
        return text
    return "".join(
        c if c in keep or unicodedata.category(c) not in _UNSAFE_CATEGORIES else repr(c)[1:-1]
        for c in text
    )


def shell_word(text: str) -> str:
    """``text`` as one word of a shell command an operator can paste: as it is when
    nothing in it is special, single-quoted when it holds only printable characters,
    else bash's ``$'...'`` with its characters escaped (``kinds resume kzw\\u200b``,
    pasted, named another kind)."""
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + repr(text)[1:-1].replace("'", "\\'") + "'"


def weight_shown(weight: float) -> str:
    """A group's weight as every read prints it: ``3`` for 3.0, ``2.5``, ``1e-06``; exact
    (``:g`` printed 123456.7 as 123457), without a trailing ``.0``."""
    text = repr(float(weight))
    return text[:-2] if text.endswith(".0") else text
