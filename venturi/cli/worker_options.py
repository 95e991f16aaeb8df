"""The options of ``venturi worker``, one alias each (as ``venturi.cli.common``'s), so that
the command's signature says which options it takes and this module what each means."""

from __future__ import annotations

from typing import Annotated

import typer

Target = Annotated[
    str,
    typer.Argument(
        metavar="MODULE[:STATE]",
        help="The dotted module that declares the tasks (app.tasks); :STATE names an "
        "attribute of it: the handlers' state, or a function that builds it.",
    ),
]
Concurrency = Annotated[
    int | None, typer.Option(help="In-flight jobs (default max(1, min(8, cores/2))).")
]
PollMax = Annotated[float, typer.Option(help="Longest idle wait, seconds.")]
Lease = Annotated[float, typer.Option(help="Default lease, seconds.")]
ShutdownTimeout = Annotated[float, typer.Option(help="Grace before force-release, seconds.")]
PriorityRatio = Annotated[
    str,
    typer.Option(help="Anti-starvation ratio (an integer >= 2), or 'strict' for strict priority."),
]
FailuresToDead = Annotated[bool, typer.Option(help="Settle a raised exception dead at once.")]
LogLevel = Annotated[str, typer.Option(help="debug, info, warning, error.")]
Processes = Annotated[int, typer.Option(help="Worker processes, each restarted 1 s after it dies.")]
RenewLease = Annotated[
    bool, typer.Option(help="Extend running jobs' leases every third of a lease.")
]
Heartbeat = Annotated[
    float, typer.Option(help="Seconds between checks of running jobs (cancel requests).")
]
Middleware = Annotated[
    list[str] | None,
    typer.Option(
        "--middleware",
        metavar="<str>",
        help="MODULE:ATTR of an async def mw(ctx, carry, call_next) wrapping every run "
        "(repeatable, the first outermost); venturi.tracing:run_span: a span per run.",
        show_default=False,
    ),
]
MetricsPort = Annotated[int | None, typer.Option(help="Serve Prometheus metrics on this port.")]
StatementTimeout = Annotated[
    float | None,
    typer.Option(
        help="Longest any statement may take, seconds (default 30, at most half the lease, "
        "at least 1)."
    ),
]
SynchronousCommit = Annotated[
    bool,
    typer.Option(
        help="Claims and completions wait for their WAL flush; with --no-synchronous-commit "
        "they do not, and a crash of the server may run the last jobs again."
    ),
]
ListenDsn = Annotated[
    str | None,
    typer.Option(
        envvar="VENTURI_LISTEN_DSN",
        help="A direct DSN for LISTEN (or VENTURI_LISTEN_DSN), when --dsn is a transaction pooler.",
        show_default=False,
    ),
]
QueueMetrics = Annotated[
    bool,
    typer.Option(help="With --metrics-port: also export the queue gauges (as `venturi metrics`)."),
]
WarnUnserved = Annotated[
    bool,
    typer.Option(help="Warn once per kind that has due jobs and no live worker registering it."),
]
LogFormat = Annotated[
    str, typer.Option(help="text, or json (one object per line, for log shippers).")
]
Loop = Annotated[
    str,
    typer.Option(
        help="Event loop: auto (uvloop where installed, else asyncio), uvloop or asyncio."
    ),
]
