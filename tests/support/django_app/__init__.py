"""A Django project for the tests of ``venturi.contrib.django``, run in subprocesses
(Django's settings are configured once per process): ``settings`` reads the database
from ``VENTURI_DJANGO_DSN``; ``scenarios`` holds what each test runs inside Django."""
