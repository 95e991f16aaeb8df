"""Settings of the test project: the database of ``VENTURI_DJANGO_DSN``, venturi's app and
the Tasks framework on ``VenturiBackend`` (options from ``VENTURI_DJANGO_TASK_OPTIONS``,
JSON)."""

from __future__ import annotations

import json
import os
import urllib.parse

_url = urllib.parse.urlsplit(os.environ["VENTURI_DJANGO_DSN"])

SECRET_KEY = "venturi-tests"
USE_TZ = True
DEBUG = False
try:
    import django.tasks  # noqa: F401

    _TASKS_APP: list[str] = []
except ImportError:
    _TASKS_APP = ["django_tasks"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    *_TASKS_APP,
    # VENTURI_TEST_WITHOUT_APP: a project that forgot the app (the system check's case).
    *([] if os.environ.get("VENTURI_TEST_WITHOUT_APP") else ["venturi.contrib.django"]),
    "tests.support.django_app",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": urllib.parse.unquote(_url.username or ""),
        "PASSWORD": urllib.parse.unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
    }
}
TASKS = {
    "default": {
        "BACKEND": "venturi.contrib.django.VenturiBackend",
        "QUEUES": ["default", "reports"],
        "OPTIONS": json.loads(os.environ.get("VENTURI_DJANGO_TASK_OPTIONS", "{}")),
    }
}
