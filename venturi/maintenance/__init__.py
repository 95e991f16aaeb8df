"""Maintenance: periodic work a worker runs beside its claim loop, never on it.

``runner`` runs the tasks (the protocol they follow, and the loop that spaces them out);
each other module is one task: ``cron`` (recurring schedules), ``results`` (forgetting
results past their ``result_ttl``), ``retention`` (deleting finished jobs), ``alerts``
(thresholds delivered to a webhook), ``search`` (the dashboard's search index,
``SearchIndex``), ``history`` (finished jobs out of the live table, ``History``),
``vacuum`` (the live table's dead row versions, ``Vacuum``). The runner's names are
importable from here, as they were when the runner was this whole module.
"""

from venturi.maintenance.history import History
from venturi.maintenance.runner import MaintenanceTask, check, run_forever, running
from venturi.maintenance.search import SearchIndex
from venturi.maintenance.vacuum import Vacuum

__all__ = [
    "History",
    "MaintenanceTask",
    "SearchIndex",
    "Vacuum",
    "check",
    "run_forever",
    "running",
]
