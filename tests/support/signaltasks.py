"""Tasks for tests that signal `venturi worker tests.support.signaltasks` subprocesses.

Each run appends "<event> <job id> <pid>" to ``events.txt`` under
$VENTURI_TEST_RUNS_DIR, so that a test awaits a handler's start (or its end) instead of
guessing how long it takes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import venturi
from tests.support.carries import Item as Item


def note(ctx: venturi.Context[Any], event: str) -> None:
    path = Path(os.environ["VENTURI_TEST_RUNS_DIR"]) / "events.txt"
    with open(path, "a") as out:
        out.write(f"{event} {ctx.job.id} {os.getpid()}\n")


@venturi.task(kind="sig_stubborn")
async def stubborn(ctx: venturi.Context[Any], carry: Item) -> None:
    """Ignores every cancellation: it never ends (a handler with a bare ``except``)."""
    note(ctx, "start")
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            note(ctx, "ignored-cancel")


@venturi.task(kind="sig_polite")
async def polite(ctx: venturi.Context[Any], carry: Item) -> None:
    """Winds down when asked to: once its cancel signal is set (the worker drains), it
    finishes when the file ``finish`` appears in the runs folder; a forced stop cancels
    it before that."""
    note(ctx, "start")
    await ctx.cancelled()
    note(ctx, "asked")
    finish = Path(os.environ["VENTURI_TEST_RUNS_DIR"]) / "finish"
    # A file, since the test is another process: nothing there could set an Event here.
    while not finish.exists():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    note(ctx, "end")


@venturi.task(kind="sig_blocking")
async def blocking(ctx: venturi.Context[Any], carry: Item) -> None:
    """Blocks the event loop (a bug: a sync call in an async handler) until the file
    ``unblock`` appears in the runs folder."""
    note(ctx, "start")
    unblock = Path(os.environ["VENTURI_TEST_RUNS_DIR"]) / "unblock"
    while not unblock.exists():
        time.sleep(0.02)  # noqa: ASYNC251 (the point: the loop runs nothing meanwhile)
    note(ctx, "end")
