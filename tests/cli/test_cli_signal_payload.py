"""`venturi jobs signal --json` with a payload PostgreSQL cannot store (a NUL, escaped,
in a string or a key): one line, exit 2, before connecting, as a real subprocess."""

from __future__ import annotations

import pytest

from tests.support import UNREACHABLE, assert_one_clean_error, venturi_cli, venturi_cli_async


@pytest.mark.parametrize("payload", ['"a\\u0000b"', '{"k\\u0000": 1}', '[1, {"x": ["\\u0000"]}]'])
def test_signal_payload_with_a_nul_is_refused_before_connecting(payload: str) -> None:
    # The DSN cannot work: the payload's error, not a connection error, proves the check
    # comes first (and so that nothing was written).
    out = venturi_cli("jobs", "signal", "1", "go", "--json", payload, "--dsn", UNREACHABLE)
    assert_one_clean_error(out, "--json", "NUL character")
    assert out.stderr.count("\n") == 1 and "cannot connect" not in out.stderr


async def test_signal_payload_with_a_nul_on_a_database_is_one_line(dsn: str) -> None:
    # Reaching the database, it was a 64-line traceback (the encoder's ValueError), exit 1.
    out = await venturi_cli_async("jobs", "signal", "1", "go", "--json", '"a\\u0000b"', dsn=dsn)
    assert_one_clean_error(out, "--json", "NUL character")
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.parametrize("raw", [b'["\xff"]', b"[" * 201 + b'"\xff"' + b"]" * 201])
def test_signal_payload_that_is_not_utf8_is_one_line(raw: bytes) -> None:
    import os

    # A byte that is not UTF-8 reaches argv as a lone surrogate: the decode (and, past
    # 200 brackets, the nesting check) raised UnicodeEncodeError, a traceback, exit 1.
    out = venturi_cli("jobs", "signal", "1", "go", "--json", os.fsdecode(raw), "--dsn", UNREACHABLE)
    assert_one_clean_error(out, "--json is not UTF-8")
