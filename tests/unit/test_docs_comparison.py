"""The docs' lists of a job's statuses are JobStatus's: a status added to the enum and
not to the pages that list them (as `waiting` once was) fails here."""

from __future__ import annotations

import re
from pathlib import Path

from venturi.status import JobStatus

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _cells(page: str, first: str) -> list[str]:
    """The cells of the table row of ``page`` whose first cell is ``first``."""
    for line in (DOCS / page).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"docs/{page} has no table row {first!r}")


def test_the_comparisons_states_are_jobstatus() -> None:
    venturi_column = _cells("comparison.md", "States")[1]
    listed = re.match(r"`([^`]*)`", venturi_column)
    assert listed, f"venturi's states are not one code span: {venturi_column!r}"
    states = [s.strip() for s in listed.group(1).split(",")]
    assert states == [s.value for s in JobStatus]


def test_the_architecture_pages_statuses_are_jobstatus() -> None:
    row = _cells("architecture.md", "What is a job's status?")[1]
    listed = re.search(r"`JobStatus` \(([^)]*)\)", row)
    assert listed, f"no JobStatus (...) list in {row!r}"
    assert re.findall(r"`([^`]+)`", listed.group(1)) == [s.value for s in JobStatus]
