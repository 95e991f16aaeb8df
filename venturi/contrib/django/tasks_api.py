"""Django's Tasks framework, from where it is: ``django.tasks`` (Django 6) when present,
else the ``django_tasks`` backport, which has the same interface.

``FRAMEWORK`` names the one in use. Django 6 dropped the backport's ``utils`` module
(``normalize_json`` moved to ``django.utils.json``), and the backport's main branch renamed
``InvalidTaskError`` to ``InvalidTask`` as Django 6 names it: both spellings are accepted,
and the two helpers the backend needs from ``utils`` are defined here."""

from __future__ import annotations

from traceback import format_exception
from typing import Any

try:
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    FRAMEWORK = "django.tasks"
except ImportError:
    from django_tasks import (
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import (
        TaskResultDoesNotExist,
    )
    from django_tasks.signals import (
        task_enqueued,
        task_finished,
        task_started,
    )
    from django_tasks.utils import normalize_json

    try:
        # The backport's main branch (its next release), named as in Django 6.
        from django_tasks.exceptions import (  # type: ignore[attr-defined,no-redef,unused-ignore]
            InvalidTask,
        )
    except ImportError:
        # django-tasks 0.12 and earlier.
        from django_tasks.exceptions import (  # type: ignore[attr-defined,no-redef,unused-ignore]
            InvalidTaskError as InvalidTask,
        )

    FRAMEWORK = "django_tasks"


def get_module_path(val: Any) -> str:
    """The dotted path Django's framework records for a class or function."""
    return f"{val.__module__}.{val.__qualname__}"


def get_exception_traceback(exc: BaseException) -> str:
    """The traceback text of a ``TaskError``, formatted as Django's backends do."""
    return "".join(format_exception(exc))


__all__ = [
    "FRAMEWORK",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "get_exception_traceback",
    "get_module_path",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
