"""venturi.testing as a distribution: the pytest plugin is registered, the package is
importable as venturi."""

from __future__ import annotations

from importlib import metadata
from importlib.metadata import entry_points

import venturi


def test_the_plugin_is_registered_for_pytest() -> None:
    # Read off venturi's own distribution: a checkout that was once installed under the
    # old name may still hold a stale venturi.egg-info declaring the same entry point.
    dist = metadata.distribution("venturi-jobs").entry_points
    [ep] = [e for e in dist if e.group == "pytest11" and e.name == "venturi"]
    assert ep.value == "venturi.pytest_plugin"
    assert ep in entry_points(group="pytest11")


def test_distributed_as_venturi_jobs_imported_as_venturi() -> None:
    # The name venturi on the package index is an unrelated project's.
    assert metadata.version("venturi-jobs") == venturi.__version__
    dist = metadata.distribution("venturi-jobs")
    assert {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"} == {
        "venturi": "venturi.cli:main"
    }
