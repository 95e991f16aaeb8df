"""The database layer: the one place venturi executes SQL.

Each statement function runs the ``sql_templates`` statement it is named after
(``jobs.job_claim`` runs ``job_claim``), takes a ``conn.Conn`` and keyword-only
parameters, and holds no SQL text. ``conn`` is the driver seam of the worker's statements, ``drivers`` the one of the
application's calls (every driver an application may hold); ``errors`` classifies
what the driver raises; ``connect`` opens connections; ``schema`` applies migrations.
"""

from venturi.db import (
    alerts,
    caps,
    conn,
    connect,
    dashboard,
    databases,
    drivers,
    errors,
    health,
    held,
    jobs,
    journal,
    kinds,
    rates,
    schedules,
    schema,
    workers,
    workflow,
)
from venturi.db.jobs import Claimant

__all__ = [
    "Claimant",
    "alerts",
    "caps",
    "conn",
    "connect",
    "dashboard",
    "databases",
    "drivers",
    "errors",
    "health",
    "held",
    "jobs",
    "journal",
    "kinds",
    "rates",
    "schedules",
    "schema",
    "workers",
    "workflow",
]
