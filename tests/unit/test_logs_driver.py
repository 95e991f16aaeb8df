"""The worker's log handler keeps the driver's own warnings to one line: asyncpg's pool logs
each failed attempt to restore its connections, while the database is down, with a whole
traceback (every second at first)."""

from __future__ import annotations

import logging

from venturi import logs


def _record(name: str, exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException as raised:
        info = (type(raised), raised, raised.__traceback__)
    return logging.LogRecord(
        name, logging.WARNING, __file__, 1, "Failed to restore %s; retrying", ("it",), info
    )


def test_a_driver_warning_with_a_traceback_is_one_line() -> None:
    record = _record("asyncpg.pool", ConnectionRefusedError(111, "Connect call failed"))
    assert logs.OneLineDriverErrors().filter(record)
    for formatter in (logs.formatter("text"), logs.formatter("json")):
        line = formatter.format(record)
        assert "\n" not in line and "Traceback" not in line, line
        assert "Failed to restore it; retrying: ConnectionRefusedError:" in line
        assert "Connect call failed" in line


def test_other_records_keep_their_traceback() -> None:
    record = _record("venturi.job", RuntimeError("boom"))
    assert logs.OneLineDriverErrors().filter(record)
    assert "Traceback" in logs.formatter("text").format(record)


def test_the_worker_handler_has_the_filter() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    for handler in before:
        root.removeHandler(handler)
    try:
        logs.configure(logging.INFO, "text")
        [handler] = [h for h in root.handlers if h not in before]
        assert any(isinstance(f, logs.OneLineDriverErrors) for f in handler.filters)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in before:
            root.addHandler(handler)
