"""docs/metrics.md's tables name every value a label takes: each settlement the worker
counts in venturi_jobs_settled_total's ``outcome``, and each status of
venturi_queue_jobs' ``status``."""

from __future__ import annotations

import re
import typing

from tests.support import ROOT
from venturi.maintenance import gauges
from venturi.runtime import settlement


def _row(metric: str) -> set[str]:
    """The values in backquotes of the table row that documents ``metric``."""
    page = (ROOT / "docs" / "metrics.md").read_text()
    [line] = [x for x in page.splitlines() if x.startswith(f"| `{metric}` |")]
    return set(re.findall(r"`([a-z-]+)`", line.split("|")[4]))


def test_every_settled_outcome_is_listed() -> None:
    outcomes = {str(s.name) for s in typing.get_args(settlement.Settlement)}
    # waiting was missing: a workflow run that waits is counted under it.
    assert outcomes - _row("venturi_jobs_settled_total") == set()


def test_every_queue_jobs_status_is_listed() -> None:
    # waiting was missing: the gauge has a series for it per kind.
    assert {str(s) for s in gauges._STATUSES} - _row("venturi_queue_jobs") == set()
