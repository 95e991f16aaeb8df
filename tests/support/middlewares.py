"""A middleware for tests that run `venturi worker --middleware` in subprocesses: each run
through it appends "<job id> <pid>" to a file of its process under
$VENTURI_TEST_RUNS_DIR."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import venturi
from venturi.middleware import CallNext


def _record(ctx: venturi.Context[Any]) -> None:
    path = os.path.join(os.environ["VENTURI_TEST_RUNS_DIR"], f"wrapped-{os.getpid()}.txt")
    with open(path, "a") as out:
        out.write(f"{ctx.job.id} {os.getpid()}\n")


async def record(ctx: venturi.Context[Any], carry: Any, call_next: CallNext) -> Any:
    _record(ctx)
    return await call_next()


def not_async(ctx: venturi.Context[Any], carry: Any, call_next: CallNext) -> Any:
    """Not a middleware: a plain def."""
    return call_next()


def wrapped(runs: Path) -> list[int]:
    """The ids of the jobs whose runs went through ``record``, from every process's file."""
    return [
        int(line.split()[0])
        for f in runs.glob("wrapped-*.txt")
        for line in f.read_text().splitlines()
    ]
