"""venturi: durable background jobs for Python on PostgreSQL.

Declare jobs with ``@venturi.task``, enqueue them inside your own transactions, and run
a ``venturi.Worker`` that claims, runs and settles them with at-least-once delivery.
"""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from venturi.backoff import Backoff
from venturi.context import Child, Context, JobMeta
from venturi.db.enqueue import JobSpec
from venturi.errors import (
    ChildFailed,
    ClaimLost,
    ConfigError,
    ConnectError,
    DuplicateJob,
    SchemaError,
    SignalTimeout,
    VenturiError,
)
from venturi.groups import set_group, set_group_sync
from venturi.jobs import (
    JobInfo,
    JournalEntry,
    get_job,
    get_job_sync,
    get_journal,
    get_journal_sync,
    get_result,
    wait,
)
from venturi.maintenance.alerts import Alerts
from venturi.maintenance.cron import CronScheduler
from venturi.maintenance.gauges import QueueGauges
from venturi.maintenance.results import ResultCleanup
from venturi.maintenance.retention import Retention
from venturi.maintenance.unserved import UnservedKinds
from venturi.outcomes import Outcome, complete, dead, pause, retry
from venturi.priority import Priority
from venturi.rate import Rate
from venturi.runtime.group import WorkerGroup
from venturi.runtime.worker import Worker
from venturi.schedules import schedule
from venturi.tasks import Task, enqueue_many, enqueue_many_sync, task
from venturi.version import __version__ as __version__
from venturi.workflow.graph import Workflow
from venturi.workflow.signals import signal, signal_sync

__all__ = [
    "Alerts",
    "Backoff",
    "Child",
    "ChildFailed",
    "ClaimLost",
    "ConfigError",
    "ConnectError",
    "Context",
    "CronScheduler",
    "DuplicateJob",
    "JobInfo",
    "JobMeta",
    "JobSpec",
    "JournalEntry",
    "Outcome",
    "Priority",
    "QueueGauges",
    "Rate",
    "ResultCleanup",
    "Retention",
    "SchemaError",
    "SignalTimeout",
    "Task",
    "UnservedKinds",
    "VenturiError",
    "Worker",
    "WorkerGroup",
    "Workflow",
    "complete",
    "dead",
    "delete_job",
    "enqueue_many",
    "enqueue_many_sync",
    "get_job",
    "get_job_sync",
    "get_journal",
    "get_journal_sync",
    "get_result",
    "pause",
    "retry",
    "schedule",
    "set_group",
    "set_group_sync",
    "signal",
    "signal_sync",
    "task",
    "wait",
]


if TYPE_CHECKING:
    # The operator's API loads on first use (``__getattr__`` below), not with the
    # package: a worker imports ``venturi`` and carries no operator code
    # (tests/unit/test_worker_imports.py). Type checkers see the names as imported.
    from venturi import admin as admin
    from venturi.admin import delete_job
else:
    # Hidden from type checkers: a module-level __getattr__ makes them accept any
    # attribute of the package (``venturi.taks(...)`` would type-check). The deprecated
    # aliases below keep working at run time; typed code uses the new names.

    def __getattr__(name: str) -> Any:
        # The operator's API, loaded here on first use (see TYPE_CHECKING above);
        # ``venturi.admin`` was an attribute of the package when it loaded with it.
        if name in ("admin", "delete_job"):
            admin = importlib.import_module("venturi.admin")
            return admin if name == "admin" else admin.delete_job
        # venturi.Pool was WorkerGroup's first name, which clashed with asyncpg's Pool.
        if name == "Pool":
            warnings.warn(
                "venturi.Pool is deprecated: use venturi.WorkerGroup",
                DeprecationWarning,
                stacklevel=2,
            )
            return WorkerGroup
        # venturi.registry was the tasks module's first name: loading it warns.
        if name == "registry":
            return importlib.import_module("venturi.registry")
        raise AttributeError(f"module 'venturi' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), "admin", "delete_job"})
