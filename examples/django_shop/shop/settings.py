"""A minimal Django project that enqueues venturi jobs from its views.

The database is ``VENTURI_DSN`` (a PostgreSQL URL). venturi's app brings its schema to
``manage.py migrate``; ``TASKS`` sends Django's own tasks to venturi too.
"""

import os
import urllib.parse

_db = urllib.parse.urlsplit(os.environ["VENTURI_DSN"])

SECRET_KEY = "example-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
ROOT_URLCONF = "shop.urls"

try:  # Django 6 ships the Tasks framework; before it, the django-tasks backport.
    import django.tasks  # noqa: F401

    _TASKS_APP = []
except ImportError:
    _TASKS_APP = ["django_tasks"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    *_TASKS_APP,
    "venturi.contrib.django",
    "orders",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.path.lstrip("/"),
        "USER": urllib.parse.unquote(_db.username or ""),
        "PASSWORD": urllib.parse.unquote(_db.password or ""),
        "HOST": _db.hostname or "",
        "PORT": str(_db.port or ""),
    }
}

# Optional: where venturi's tables live (these are the defaults).
VENTURI = {"DATABASE": "default", "SCHEMA": "venturi"}

TASKS = {"default": {"BACKEND": "venturi.contrib.django.VenturiBackend"}}
