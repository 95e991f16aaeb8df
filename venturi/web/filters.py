"""The dashboard templates' filters and globals: ``duration``, ``clip``, ``pretty`` (the
JSON form) and ``ago``."""

from __future__ import annotations

import jinja2

from venturi.formatting import ago, clip, duration, to_json


def install(env: jinja2.Environment) -> None:
    """Give ``env``'s templates the dashboard's filters and globals."""
    env.filters["duration"] = duration
    env.filters["clip"] = clip
    env.filters["pretty"] = to_json
    env.globals["ago"] = ago
