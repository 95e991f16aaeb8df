"""Deprecated: the decorator, ``Task`` and ``enqueue_many`` live in ``venturi.tasks``.

Importing this module warns once (a ``DeprecationWarning``) and re-exports the names
it held, so ``from venturi.registry import ...`` keeps working.
"""

from __future__ import annotations

import warnings

from venturi.db.enqueue import JobSpec
from venturi.handler_types import default_cron_carry
from venturi.tasks import (
    DEFAULT_MAX_CARRY_BYTES,
    DEFAULT_MAX_FAILURES,
    Handler,
    HandlerOf,
    Task,
    TaskDecorator,
    enqueue_many,
    enqueue_many_sync,
    registered,
    task,
    unregister,
)

__all__ = [
    "DEFAULT_MAX_CARRY_BYTES",
    "DEFAULT_MAX_FAILURES",
    "Handler",
    "HandlerOf",
    "JobSpec",
    "Task",
    "TaskDecorator",
    "default_cron_carry",
    "enqueue_many",
    "enqueue_many_sync",
    "registered",
    "task",
    "unregister",
]

warnings.warn(
    "venturi.registry is deprecated: import from venturi.tasks (JobSpec: venturi.JobSpec)",
    DeprecationWarning,
    stacklevel=2,
)
