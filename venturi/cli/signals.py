"""How a command that runs until stopped hears SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def install_signal_handlers(shutdown: asyncio.Event) -> None:
    """SIGINT/SIGTERM set the shutdown event; a second one stops at once."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        if shutdown.is_set():
            os._exit(130)
        shutdown.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop)
