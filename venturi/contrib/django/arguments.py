"""The arguments of ``manage.py venturi worker``, each described for ``--help``: the
worker's own knobs of ``venturi worker`` and the Django queues to run."""

from __future__ import annotations

import argparse


def worker_parser() -> argparse.ArgumentParser:
    """The parser of ``manage.py venturi worker``'s arguments."""
    parser = argparse.ArgumentParser(
        prog="manage.py venturi worker",
        description="Run a worker on the project's database until SIGINT/SIGTERM: the "
        "venturi tasks of each MODULE and the Django tasks of the VenturiBackend queues.",
    )
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help="A dotted module of venturi tasks."
    )
    parser.add_argument(
        "--queue",
        action="append",
        default=None,
        metavar="NAME",
        help="A Django queue to run (repeatable); default: every VenturiBackend's QUEUES.",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="In-flight jobs (default max(1, min(8, cores/2))).",
    )
    parser.add_argument(
        "--poll-max",
        type=float,
        default=30.0,
        help="Longest idle wait, seconds (default %(default)s).",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=900.0,
        help="Default lease, seconds (default %(default)s).",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="Grace before force-release, seconds (default %(default)s).",
    )
    parser.add_argument(
        "--priority-ratio",
        default="4",
        help="Anti-starvation ratio (an integer >= 2, default %(default)s), or 'strict' for "
        "strict priority.",
    )
    parser.add_argument(
        "--renew-lease",
        action="store_true",
        help="Extend running jobs' leases every third of a lease.",
    )
    parser.add_argument(
        "--no-synchronous-commit",
        dest="synchronous_commit",
        action="store_false",
        help="Claims and completions do not wait for their WAL flush (a crash of the "
        "server may run the last jobs again).",
    )
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=1.0,
        help="Seconds between checks of running jobs (cancel requests; default %(default)s).",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port."
    )
    parser.add_argument(
        "--log-level", default="info", help="debug, info (the default), warning, error."
    )
    return parser
