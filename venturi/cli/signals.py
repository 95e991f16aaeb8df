"""How a command that runs until stopped hears SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable

import typer

# After a second signal, how long releasing the running jobs may take before the process
# exits regardless (the database may be what is not answering).
FORCED_EXIT_WITHIN = 15.0


def exit_now(message: str) -> None:
    typer.echo(f"venturi: {message}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: a handler blocked in a thread, or one that ignores its cancellation,
    # would hold the interpreter's shutdown.
    os._exit(130)


def install_signal_handlers(
    shutdown: asyncio.Event, force: Callable[[], None] | None = None, grace: float | None = None
) -> None:
    """SIGINT/SIGTERM set the shutdown event (handlers get ``grace`` seconds to wind
    down); a second one calls ``force``, which should stop at once, releasing the running
    jobs; a third (or a second without ``force``) exits at once."""
    loop = asyncio.get_running_loop()
    signals = 0

    def stop() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            within = "" if grace is None else f" up to {grace:g}s"
            typer.echo(
                f"venturi: stopping: running jobs get{within} to finish; a second signal "
                "releases them and exits at once",
                err=True,
            )
            shutdown.set()
        elif signals == 2 and force is not None:
            force()
        else:
            exit_now("stopped at once; running jobs are recovered when their leases expire")

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)
