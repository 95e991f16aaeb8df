"""`venturi purge --older-than` refuses a duration outside the documented form before
connecting: `6M` was six minutes, and the purge then deleted the history an operator
meaning six months wanted kept. A real process."""

from __future__ import annotations

import pytest

from tests.support import UNREACHABLE, assert_one_clean_error, venturi_cli


@pytest.mark.parametrize("text", ["6M", "1h1h", "30m1h", "\u0661\u0662h", " 7d "])
def test_purge_refuses_a_duration_outside_the_documented_form(text: str) -> None:
    out = venturi_cli("purge", "--older-than", text, "--dsn", UNREACHABLE)
    assert_one_clean_error(out, "older-than", "'M' is not months")
    assert out.stderr.count("\n") == 1 and "cannot connect" not in out.stderr
