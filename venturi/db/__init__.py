"""The database layer: the one place venturi executes SQL.

Each statement function runs the ``sql_templates`` statement it is named after
(``jobs.job_claim`` runs ``job_claim``), takes a ``conn.Conn`` and keyword-only
parameters, and holds no SQL text. ``conn`` is the driver seam; ``errors`` classifies
what the driver raises; ``connect`` opens connections; ``schema`` applies migrations.
"""

from venturi.db import (
    alerts,
    conn,
    connect,
    dashboard,
    databases,
    errors,
    held,
    jobs,
    journal,
    kinds,
    rates,
    schedules,
    schema,
    workers,
)
from venturi.db.jobs import Claimant

__all__ = [
    "Claimant",
    "alerts",
    "conn",
    "connect",
    "dashboard",
    "databases",
    "errors",
    "held",
    "jobs",
    "journal",
    "kinds",
    "rates",
    "schedules",
    "schema",
    "workers",
]
