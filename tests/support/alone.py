"""Tests that need the whole machine run alone, even in a parallel run.

The suite runs in parallel (pytest-xdist, ``-n`` in pyproject's addopts): most tests wait
on PostgreSQL or on a subprocess, so several run at once on two cores. A few must not
share the machine: they start clusters, kill processes, time what they see or drive a
browser (the ``serial`` marker; the ``soak`` tests too). Every test holds a lock shared by
the run's workers while it runs, setup and teardown included: an ordinary test shares it,
a serial test holds it alone, so while a serial test runs no other test runs in any
worker. The conftest sorts serial tests last, so they make a serial phase at the end of
the run rather than pauses all through it.

Ordinary tests go first: a serial test waits while any ordinary test runs or asks for
the lock (a ``flock`` grants shared holds while an exclusive one waits). The serial tests
are last in every worker's queue, so they wait only for the ordinary tests still to run,
which then run side by side before the serial phase instead of one at a time within it:
with serial tests going first (a gate every test took, held by a waiting serial test),
the ordinary tests other workers had started waited out the whole serial phase behind it
(12 of them, 10 s of the run at the end: a timeline of a parallel run, issue 39). A
worker whose next test is serial too keeps the lock from one to the next: given back
between them, it let the other workers start ordinary tests in the moment between, and
the next serial test waited for the longest of those to end, with the machine mostly
idle meanwhile (1.5-3 s before each of the serial tests, the phase 74 s for 52 s of
tests, in a parallel run at load 3-4). The lock is a ``flock`` on a file in the run's
base temporary directory, which xdist's workers share; the kernel drops it when a worker
dies. Without xdist (``-n 0``, ``-p no:xdist``) there is one process and
no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Markers whose tests run alone.
MARKERS = ("serial", "soak")


def is_serial(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) is not None for m in MARKERS)


class Turns:
    """A readers-writer lock across the run's worker processes, readers first."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._room = os.open(folder / "venturi-alone.room", os.O_RDWR | os.O_CREAT, 0o600)
        # Still held alone from the serial test before (``keep``).
        self._kept = False

    @contextlib.contextmanager
    def hold(self, alone: bool, keep: bool = False) -> Iterator[None]:
        """Run alone or beside other ordinary tests; a serial test with ``keep`` (the
        worker's next test is serial too) keeps the lock for it."""
        if self._kept and not alone:  # not asked for by the test kept for (a bug)
            self._kept = False
            fcntl.flock(self._room, fcntl.LOCK_UN)
        if not self._kept:
            fcntl.flock(self._room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        self._kept = False
        try:
            yield
        finally:
            if alone and keep:
                self._kept = True
            else:
                fcntl.flock(self._room, fcntl.LOCK_UN)


def turns(config: pytest.Config) -> Turns | None:
    """The run's lock in an xdist worker, else None. xdist gives each worker the basetemp
    ``<the run's basetemp>/popen-gwN``, so the parent is the run's own folder."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    basetemp = config.getoption("basetemp")
    if basetemp:
        return Turns(Path(basetemp).parent)
    return Turns(Path(tempfile.gettempdir()) / f"venturi-alone-{workerinput['testrunuid']}")
