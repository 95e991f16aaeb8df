"""Alerts' knobs are checked when they are made."""

from __future__ import annotations

from typing import Any

import pytest

from venturi import Alerts, ConfigError


@pytest.mark.parametrize(
    ("args", "knobs", "match"),
    [
        ((), {"queue_depth": 1}, "webhook URL or a hook"),
        (("ftp://x/",), {"queue_depth": 1}, "http"),
        (("http://127.0.0.1/",), {}, "at least one threshold"),
        (("http://127.0.0.1/",), {"error_rate": 0}, "error_rate"),
        (("http://127.0.0.1/",), {"error_rate": 1.5}, "error_rate"),
        (("http://127.0.0.1/",), {"queue_depth": -1}, "queue_depth"),
        (("http://127.0.0.1/",), {"queue_depth": {"k": "x"}}, "queue_depth"),
        (("http://127.0.0.1/",), {"oldest_pending": 0}, "oldest_pending"),
        (("http://127.0.0.1/",), {"queue_depth": 1, "timeout": 0}, "timeout"),
        (("http://127.0.0.1/",), {"queue_depth": 1, "interval": -1}, "interval"),
        ((), {"hook": "not callable", "queue_depth": 1}, "hook"),
        # A string is an iterable of its letters: "export" was checked as e, x, p, o, r, t.
        (("http://127.0.0.1/",), {"queue_depth": 1, "kinds": "export"}, "kinds must be"),
        (("http://127.0.0.1/",), {"queue_depth": 1, "kinds": ["ok", ""]}, "alerts kinds"),
        (("http://127.0.0.1/",), {"queue_depth": {"": 1}}, "alerts queue_depth"),
    ],
)
def test_bad_alerts(args: tuple[Any, ...], knobs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Alerts(*args, **knobs)


def test_alerts_kinds_are_the_kinds_given() -> None:
    alerts = Alerts("http://127.0.0.1/", queue_depth={"export": 5}, kinds=("export", "mail"))
    assert alerts.kinds == frozenset({"export", "mail"})
