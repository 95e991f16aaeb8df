"""Pausing a kind that is paused already: without --reason it keeps the reason (and who
gave it) the first pause recorded; with one it replaces both. Real processes."""

from __future__ import annotations

import json

from tests.support import venturi_cli_async


async def _listed(dsn: str) -> tuple[str, str, str]:
    out = await venturi_cli_async("kinds", "list", "--json", dsn=dsn)
    [row] = json.loads(out.stdout)
    return row["paused_at"], row["paused_by"], row["reason"]


async def test_a_second_pause_without_a_reason_keeps_the_first(dsn: str) -> None:
    why = "INC-4411: double charges, do not resume"
    first = await venturi_cli_async(
        "kinds", "pause", "billing", "--reason", why, dsn=dsn, env={"USER": "ops1"}
    )
    assert first.returncode == 0, first.stderr
    at, by, reason = await _listed(dsn)
    assert reason == why and "ops1" in by
    # A second operator, or a script, pauses it again with nothing to add: the reason
    # used to be erased.
    again = await venturi_cli_async("kinds", "pause", "billing", dsn=dsn, env={"USER": "bot"})
    assert again.returncode == 0, again.stderr
    assert await _listed(dsn) == (at, by, why)
    # With a reason of its own, the later pause says who paused it and why now.
    newer = await venturi_cli_async(
        "kinds", "pause", "billing", "--reason", "refunds done", dsn=dsn, env={"USER": "ops2"}
    )
    assert newer.returncode == 0, newer.stderr
    at2, by2, reason2 = await _listed(dsn)
    assert (at2, reason2) == (at, "refunds done") and "ops2" in by2
