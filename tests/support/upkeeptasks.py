"""Tasks for tests that run `venturi worker tests.support.upkeeptasks` in a subprocess: a task
on an every-second cron schedule. Each run appends "<job id> <pid>" to a file of its
process under $VENTURI_TEST_RUNS_DIR."""

from __future__ import annotations

import os
from typing import Any

import msgspec

import venturi


class Beat(msgspec.Struct):
    label: str = "beat"


@venturi.task(kind="upkeep_heartbeat", cron="* * * * * *", result_ttl=60)
def heartbeat(ctx: venturi.Context[Any], carry: Beat) -> venturi.Outcome:
    """Runs every second (in a thread: a plain def); records that it ran."""
    path = os.path.join(os.environ["VENTURI_TEST_RUNS_DIR"], f"beats-{os.getpid()}.txt")
    with open(path, "a") as out:
        out.write(f"{ctx.job.id} {os.getpid()}\n")
    return venturi.complete(carry.label)
