"""A kind's health: ``KindHealth``, the one struct every read of it returns (``venturi
stats``, ``venturi top`` and the dashboard through ``venturi.admin.health``; the queue
gauges through ``venturi.maintenance.gauges``), and the rule that marks a kind no live
worker serves (``unserved``). Below both, so that a worker exporting the gauges loads no
operator code."""

from __future__ import annotations

import msgspec


class KindHealth(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One kind. ``due`` pending jobs may run now, ``scheduled`` ones later; ``waiting``
    workflows wait for a timer, a signal, children or dependencies; ``expired``
    claims await recovery; ``oldest_due_seconds`` is how long the longest-waiting due job
    has been claimable; ``completed_recent`` and ``failures_recent`` count over the
    read's windows (the gauges leave them out). ``completed`` (all time) is counted by
    ``stats`` only, ``cancelled`` by all but ``top``, ``workers`` (the live workers that
    register the kind) by the gauges only: None where the read leaves a count out, and
    then absent from the JSON form (which omits only fields that have a default)."""

    kind: str
    due: int
    scheduled: int
    waiting: int
    claimed: int
    expired: int
    completed: int | None = None
    dead: int
    cancelled: int | None = None
    oldest_due_seconds: float | None
    completed_recent: int | None = None
    failures_recent: int | None = None
    # An operator paused the kind (`venturi kinds pause`): no worker claims it.
    paused: bool
    # Due jobs wait and no live worker registers the kind: nobody will run them.
    no_live_worker: bool
    workers: int | None = None

    @classmethod
    def idle(cls, kind: str, *, paused: bool) -> KindHealth:
        """A kind without a job (a paused one still belongs on a page, to resume it)."""
        return cls(
            kind=kind,
            due=0,
            scheduled=0,
            waiting=0,
            claimed=0,
            expired=0,
            dead=0,
            cancelled=0,
            oldest_due_seconds=None,
            completed_recent=0,
            failures_recent=0,
            paused=paused,
            no_live_worker=False,
        )


def unserved(due: int, served: bool) -> bool:
    """The ``no_live_worker`` mark: due jobs wait and no live worker registers the kind."""
    return due > 0 and not served
