"""Maintenance: periodic work a worker runs beside its claim loop, never on it.

Each module is one task: ``cron`` (recurring schedules), ``results`` (forgetting
results past their ``result_ttl``), ``retention`` (deleting finished jobs), ``alerts``
(thresholds delivered to a webhook), ``search`` (the dashboard's search index,
``SearchIndex``), ``history`` (finished jobs out of the live table, ``History``),
``vacuum`` (the live table's dead row versions, ``Vacuum``). The tasks run on the worker's
runner, ``venturi.runtime.maintainer`` (the protocol they follow, and the loop that spaces
them out): a task needs the runtime, the runtime needs no task. The runner's names are
importable from here, as they were when the runner was this whole module.
"""

from venturi.maintenance.history import History
from venturi.maintenance.search import SearchIndex
from venturi.maintenance.vacuum import Vacuum
from venturi.runtime.maintainer import MaintenanceTask, check, run_forever, running

__all__ = [
    "History",
    "MaintenanceTask",
    "SearchIndex",
    "Vacuum",
    "check",
    "run_forever",
    "running",
]
