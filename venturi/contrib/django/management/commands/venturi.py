"""``manage.py venturi``: venturi's command line on the project's ``DATABASES``.

- ``manage.py venturi worker [MODULE ...] [--queue NAME ...] [options]`` runs a worker
  over the venturi tasks of the modules given and every Django task enqueued through a
  ``VenturiBackend`` (the queues of ``TASKS``, or those named with ``--queue``);
- ``manage.py venturi schema apply`` applies or upgrades the schema on Django's
  connection;
- any other command (``jobs list``, ``stats``, ``schema render``, ...) is venturi's own,
  run with the DSN of the ``VENTURI["DATABASE"]`` alias.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from venturi.contrib.django import config
from venturi.tasks import Task


class Command(BaseCommand):  # type: ignore[misc]
    help = "venturi on this project's database: worker, schema apply, and venturi's commands."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("command", help="worker, schema apply, or any venturi command")
        parser.add_argument("rest", nargs=argparse.REMAINDER)

    def handle(self, *args: Any, **options: Any) -> None:
        command, rest = options["command"], without_django_options(options["rest"])
        if command == "worker":
            self.worker(rest)
        elif command == "schema" and rest[:1] == ["apply"]:
            if rest[1:]:
                raise CommandError("manage.py venturi schema apply takes no options")
            applied = self.apply_schema()
            what = (
                f"applied migration(s) {', '.join(map(str, applied))}" if applied else "up to date"
            )
            self.stdout.write(f"schema {config.schema()}: {what}")
        else:
            self.forward([command, *rest])

    def apply_schema(self) -> list[int]:
        """``config.apply_schema``, its refusals as the plain ``venturi schema apply``
        says them: one line, exit 2 (a held lock, a read-only database were a traceback,
        exit 1)."""
        from django.db import DatabaseError

        from venturi.db.errors import DATABASE_ERRORS, one_line
        from venturi.errors import VenturiError

        try:
            return config.apply_schema()
        except VenturiError as exc:
            said = str(exc)
        except (DatabaseError, *DATABASE_ERRORS) as exc:  # Django's connection, or asyncpg's
            said = f"database error: {one_line(exc)}"
        self.stderr.write(f"venturi: {said}")
        raise SystemExit(2)

    def forward(self, argv: list[str]) -> None:
        """venturi's own command, on the project's database."""
        from venturi.cli.app import app

        # The project's database, whatever VENTURI_DSN says outside it.
        os.environ["VENTURI_DSN"] = config.dsn()
        # Standalone, as the plain `venturi` runs: a usage error or a command's error is
        # printed as it prints it, then the app exits with its code. Exiting 0 returns to
        # Django; any other code exits the process with it, without a traceback.
        try:
            app(argv, prog_name="manage.py venturi")
        except SystemExit as exc:
            if exc.code:
                raise

    def worker(self, argv: list[str]) -> None:
        from venturi import middleware
        from venturi.cli.worker import load_target, parse_priority_ratio, serve
        from venturi.contrib.django.arguments import worker_parser
        from venturi.errors import ConfigError

        ns = _with_middleware(worker_parser()).parse_args(argv)
        chain = []
        for spec in ns.middleware or []:
            try:
                chain.append(middleware.load(spec))
            except ConfigError as exc:
                # Exit 2, as `venturi worker` refuses it: a usage error, before any start.
                raise CommandError(f"--middleware {spec}: {exc}", returncode=2) from None
        level = getattr(logging, ns.log_level.upper(), None)
        if not isinstance(level, int):
            raise CommandError(
                f"log-level must be debug, info, warning or error, got {ns.log_level!r}"
            )
        # venturi worker's own log setup: its format, and the driver's connection errors on
        # one line (asyncpg's pool logged a traceback a retry while the database was down).
        from venturi import logs

        logs.configure(level, "text")
        tasks: dict[str, Task[Any]] = {}
        for module in ns.modules:
            found, _ = load_target(module)
            tasks.update({t.kind: t for t in found})
        for queue in self.queues(ns.queue):
            from venturi.contrib.django.backend import runner

            t = runner(queue)
            tasks[t.kind] = t
        if not tasks:
            raise CommandError(
                "nothing to run: name a MODULE of venturi tasks, or configure TASKS with "
                "venturi.contrib.django.VenturiBackend"
            )
        self.stdout.write(f"venturi worker: {', '.join(sorted(tasks))}")
        self.stdout.flush()
        serve(
            list(tasks.values()),
            None,
            "manage.py venturi worker",
            config.dsn(),
            concurrency=ns.concurrency,
            poll_max=ns.poll_max,
            lease=ns.lease,
            shutdown_timeout=ns.shutdown_timeout,
            priority_ratio=parse_priority_ratio(ns.priority_ratio),
            failures_to_dead=False,
            schema=config.schema(),
            renew_lease=ns.renew_lease,
            heartbeat=ns.heartbeat,
            metrics_port=ns.metrics_port,
            synchronous_commit=ns.synchronous_commit,
            middleware=chain,
        )

    def queues(self, named: list[str] | None) -> list[str]:
        """The Django queues to run: those named, else every VenturiBackend's QUEUES."""
        try:
            from venturi.contrib.django.backend import venturi_backends
        except ImportError:
            # No Tasks framework installed: only venturi's own tasks.
            if named:
                raise CommandError(
                    "--queue needs django.tasks or the django-tasks backport"
                ) from None
            return []
        backends = venturi_backends()
        if named:
            return sorted(set(named))
        if any(not b.queues for b in backends):
            raise CommandError(
                "a VenturiBackend in TASKS accepts any queue (QUEUES is empty): name the "
                "queues this worker runs with --queue"
            )
        return sorted({q for b in backends for q in b.queues})


def _with_middleware(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with ``--middleware MODULE:ATTR`` (repeatable), as ``venturi worker``'s."""
    parser.add_argument(
        "--middleware",
        action="append",
        default=None,
        metavar="MODULE:ATTR",
        help="An async def mw(ctx, carry, call_next) wrapping every run (repeatable, the "
        "first outermost); venturi.tracing:run_span opens a span per run.",
    )
    return parser


# Django's own options that take a value, which it reads wherever they stand in the command
# line: after the subcommand they are Django's too, not venturi's.
DJANGO_OPTIONS = ("--settings", "--pythonpath")


def without_django_options(argv: list[str]) -> list[str]:
    """``argv`` less ``--settings X`` / ``--pythonpath X`` (Django applied them already)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in DJANGO_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in DJANGO_OPTIONS)):
            kept.append(arg)
    return kept
