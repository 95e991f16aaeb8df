"""How a command that runs until stopped hears SIGINT/SIGTERM/SIGHUP, and a supervised worker
process its supervisor (``ask``)."""

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

# What a supervisor asks of a worker process (``ask``): what a first, second and third
# signal do.
DRAIN, FORCE, EXIT = 1, 2, 3

# Set by install_signal_handlers: hands a request to the running command's loop.
_asked: Callable[[int], None] | None = None


def stop_signals() -> list[signal.Signals]:
    """The signals that stop a worker: SIGINT, SIGTERM and SIGHUP. A SIGHUP is a closed
    terminal or ssh session: by default it killed the worker outright, leaving its jobs
    claimed until their leases expired (and a supervisor died while its children
    drained). One that is ignored (``nohup``) stays ignored."""
    found = [signal.SIGINT, signal.SIGTERM]
    hup = getattr(signal, "SIGHUP", None)  # none on Windows
    if hup is not None and signal.getsignal(hup) is not signal.SIG_IGN:
        found.append(hup)
    return found


def exit_now(message: str) -> None:
    typer.echo(f"venturi: {message}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: a handler blocked in a thread, or one that ignores its cancellation,
    # would hold the interpreter's shutdown.
    os._exit(130)


def ask(level: int) -> None:
    """From any thread: do what the ``level``-th signal does (``DRAIN``, ``FORCE``,
    ``EXIT``), unless the process has already. Unlike a signal, a request adds to no
    count: a supervisor passes its operator's signal on this way, so a child that got
    the same signal itself (systemd signals every process of a unit at once) does not
    count two and stop at once."""
    asked = _asked
    if asked is None:
        # Not listening yet (still starting, nothing claimed): SIGTERM's default action.
        os.kill(os.getpid(), signal.SIGTERM)
        return
    asked(level)


def install_signal_handlers(
    shutdown: asyncio.Event, force: Callable[[], None] | None = None, grace: float | None = None
) -> None:
    """SIGINT/SIGTERM/SIGHUP (``stop_signals``) set the shutdown event (handlers get ``grace`` seconds to wind
    down); a second one calls ``force``, which should stop at once, releasing the running
    jobs; a third (or a second without ``force``) exits at once. ``ask`` reaches the same
    steps without counting as a signal."""
    global _asked
    loop = asyncio.get_running_loop()
    signals = 0  # received by this process
    done = 0  # the steps taken, of signals and requests

    def step(level: int) -> None:
        nonlocal done
        while done < level:
            done += 1
            if done == 1:
                within = "" if grace is None else f" up to {grace:g}s"
                typer.echo(
                    f"venturi: stopping: running jobs get{within} to finish; a second signal "
                    "releases them and exits at once",
                    err=True,
                )
                shutdown.set()
            elif done == 2 and force is not None:
                force()
            else:
                exit_now(exiting())

    last = EXIT if force is not None else FORCE

    def counted(signum: int, frame: object) -> None:
        # Python runs this in the main thread between two bytecodes, even while a handler
        # blocks the event loop (time.sleep in an async def): the loop's own handling
        # waited for the block to end, so three signals in a row were all deaf, then
        # acted on together. The third exits here and now; the others are the loop's.
        nonlocal signals
        signals += 1
        if signals >= last:
            exit_now(exiting())

    def exiting() -> str:
        # What is true when the process exits: after a forced stop the running jobs were
        # being released (most often they all were); before one, none was.
        if done >= FORCE and force is not None:
            return (
                "stopped at once on a third signal while the running jobs were released; "
                "any whose release was not written are recovered when their leases expire"
            )
        return "stopped at once; running jobs are recovered when their leases expire"

    def stop() -> None:  # on the loop, after ``counted``
        step(max(signals, 1))

    def asked(level: int) -> None:
        if level >= EXIT:
            # At once, from the pipe's thread: the loop may be blocked (see ``counted``).
            exit_now(exiting())
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
            loop.call_soon_threadsafe(step, level)

    for sig in stop_signals():
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)
            # In place of the loop's handler, which does nothing: the loop still hears
            # the signal (through its wakeup descriptor) and calls ``stop``.
            signal.signal(sig, counted)
    _asked = asked
