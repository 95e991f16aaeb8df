"""The network and server fault scenarios (``python -m tests.chaos.scenarios NAME``), short.

Each runs 12 s of load around its one fault (about 25 s with its cluster's start and the
drain): nothing lost, nothing stuck, every re-run explained, no dropped outcome, and no
worker that ignores SIGTERM. Marked ``soak``: run with ``pytest --soak`` (.ci/run runs
them once after the suite). The long soak with every fault together is
``python -m tests.chaos.scenarios all`` (docs/chaos.md), not part of the suite.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos import scenarios, standby

SHORT = tuple(n for n in scenarios.NAMES if n != "all")
# What each fault must be seen to do: its counter (how many times it was applied) and one
# effect in the scenario's figures that the fault causes, so that a scenario whose
# fault never took effect cannot pass for one that survived it.
LOGGED = "worker log lines: {!r}"
FAULTS = {
    "failover": ("failovers", 1),
    "blackhole": ("black-holes", 2),
    "refused-writes": ("write refusals", 1),
    "slow": ("slow periods", 1),
}


def effect(name: str, figures: dict[str, Any]) -> int:
    """How often the fault's effect was seen (at least once, for a fault that took)."""
    if name == "failover":  # the primary went away under every worker's LISTEN
        return int(figures[LOGGED.format("LISTEN connection lost")])
    if name == "blackhole":  # a black-holed worker gave up on its connections
        return sum(
            1
            for k, v in figures.items()
            if k.endswith("noticed its black-holed connections") and not v.startswith("never")
        )
    if name == "refused-writes":
        return int(figures[LOGGED.format("read-only transaction")])
    return int(figures["statements (chunks) the proxies delayed"])


@pytest.mark.soak
@pytest.mark.parametrize("name", SHORT)
async def test_scenario(name: str) -> None:
    if name == "failover" and standby.missing_tools():
        pytest.skip(str(standby.missing_tools()))
    result = await scenarios.run(name, seconds=12, seed=11, echo=lambda _line: None)
    assert result.report.lost == 0, result.summary
    assert result.report.stuck == 0, result.summary
    assert result.ok, result.summary
    counter, times = FAULTS[name]
    assert result.counters[counter] == times, result.summary
    assert effect(name, result.figures) >= 1, result.summary
