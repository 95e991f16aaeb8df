"""The database layer: the one place venturi executes SQL.

Each statement function runs the ``sql_templates`` statement it is named after
(``claims.job_claim`` runs ``job_claim``), takes a ``conn.Conn`` and keyword-only
parameters, and holds no SQL text. ``conn`` is the driver seam of the worker's statements, ``drivers`` the one of the
application's calls (every driver an application may hold). Statements on jobs live by
caller: ``enqueue`` (the application's inserts, ``JobSpec``), ``claims`` (the worker's
claim, within shared rate limits and global caps, and stale recovery), ``settle`` (the
worker's ``_if_owned`` settlements and heartbeat), ``reads`` and ``operations`` (the
operators' statements), ``search`` (the dashboard's search and its index),
``workflow_reads`` (the dashboard's workflow views), ``groups`` (the grouped claim and
a group's settings and reads); ``errors`` classifies
what the driver raises; ``connect`` opens connections; ``schema`` applies migrations.
"""

from venturi.db import (
    alerts,
    claims,
    conn,
    connect,
    dashboard,
    databases,
    drivers,
    enqueue,
    errors,
    groups,
    health,
    held,
    journal,
    kinds,
    operations,
    reads,
    schedules,
    schema,
    search,
    settle,
    workers,
    workflow,
    workflow_reads,
)
from venturi.db.claims import Claimant

__all__ = [
    "Claimant",
    "alerts",
    "claims",
    "conn",
    "connect",
    "dashboard",
    "databases",
    "drivers",
    "enqueue",
    "errors",
    "groups",
    "health",
    "held",
    "journal",
    "kinds",
    "operations",
    "reads",
    "schedules",
    "schema",
    "search",
    "settle",
    "workers",
    "workflow",
    "workflow_reads",
]
