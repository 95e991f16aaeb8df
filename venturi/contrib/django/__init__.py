"""venturi in a Django project.

Add ``"venturi.contrib.django"`` to ``INSTALLED_APPS``: ``manage.py migrate`` applies
venturi's schema (and upgrades it after a venturi upgrade), ``manage.py venturi worker``
runs a worker and ``manage.py venturi schema apply`` applies the schema, all on the
project's ``DATABASES``. Enqueue with ``task.enqueue_sync(django.db.connection, carry)``:
inside ``transaction.atomic()`` the job is part of the block's transaction.

``VenturiBackend`` runs Django's own tasks (``django.tasks``, or the ``django_tasks``
backport): ``TASKS = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend"}}``.
Inside a Django task that backend runs, ``job_context()`` is the venturi ``Context`` of
the run: its workflow primitives (``step``, ``sleep``, ``wait_for_signal`` ...) are
blocking calls in a sync task (docs/django.md). ``with group("acme"):`` puts the Django
tasks enqueued in the block in that group (docs/groups.md).

Settings (all optional): ``VENTURI = {"DATABASE": "default", "SCHEMA": "venturi"}``, the
``DATABASES`` alias that holds venturi's tables and the schema they are in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VenturiBackend", "group", "job_context"]


def __getattr__(name: str) -> Any:
    # Loaded when first named (TASKS' BACKEND path), not when Django imports the app:
    # the Tasks framework may not be installed in a project that only enqueues.
    if name == "VenturiBackend":
        from venturi.contrib.django.backend import VenturiBackend

        return VenturiBackend
    if name == "job_context":
        from venturi.contrib.django.backend import job_context

        return job_context
    if name == "group":
        from venturi.contrib.django.grouping import group

        return group
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
