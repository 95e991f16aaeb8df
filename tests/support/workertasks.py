"""Tasks for tests that run `venturi worker tests.support.workertasks` in subprocesses.

Each run appends "<job id> <attempt> <pid>" to a file of its own process under
$VENTURI_TEST_RUNS_DIR, so the test can check afterwards which jobs ran how often.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import venturi
from tests.support.carries import Item as Item  # re-exported: tests name workertasks.Item
from tests.support.waits import until_cancelled


def _record(ctx: venturi.Context[Any]) -> None:
    path = os.path.join(os.environ["VENTURI_TEST_RUNS_DIR"], f"runs-{os.getpid()}.txt")
    with open(path, "a") as out:
        out.write(f"{ctx.job.id} {ctx.job.attempt} {os.getpid()}\n")


@venturi.task(kind="proc_count")
async def count(ctx: venturi.Context[Any], carry: Item) -> None:
    """A no-op that records that it ran."""
    _record(ctx)


@venturi.task(kind="proc_block")
async def block(ctx: venturi.Context[Any], carry: Item) -> None:
    """The first attempt hangs (until its process is killed); later attempts complete."""
    _record(ctx)
    if ctx.job.attempt == 1:
        await until_cancelled()


@venturi.task(kind="proc_stuck_sync")
def stuck(ctx: venturi.Context[Any], carry: Item) -> None:
    """A sync handler stuck for good in a blocking call (no cancel reaches a thread)."""
    _record(ctx)
    threading.Event().wait()


def _wait_for_good() -> None:
    threading.Event().wait()


@venturi.task(kind="proc_stuck_step")
async def stuck_step(ctx: venturi.Context[Any], carry: Item) -> None:
    """An async handler whose sync step function is stuck for good in its thread."""
    _record(ctx)
    await ctx.step("stuck", _wait_for_good)
