"""The network and server fault scenarios (``python -m tests.chaos.scenarios NAME``), short.

Each runs 12 s of load around its one fault (about 25 s with its cluster's start and the
drain): nothing lost, nothing stuck, every re-run explained, no dropped outcome, and no
worker that ignores SIGTERM. The long soak with every fault together is
``python -m tests.chaos.scenarios all`` (docs/chaos.md), not part of the suite.
"""

from __future__ import annotations

import pytest

from tests.chaos import scenarios, standby

SHORT = tuple(n for n in scenarios.NAMES if n != "all")


@pytest.mark.parametrize("name", SHORT)
async def test_scenario(name: str) -> None:
    if name == "failover" and standby.missing_tools():
        pytest.skip(str(standby.missing_tools()))
    result = await scenarios.run(name, seconds=12, seed=11, echo=lambda _line: None)
    assert result.report.lost == 0, result.summary
    assert result.report.stuck == 0, result.summary
    assert result.ok, result.summary
