"""The task module the chaos harness's worker processes run
(``venturi worker tests.chaos.tasks``).

Every run appends a start line ``S <job> <attempt> <pid> <kind> <time>`` and, when the
handler returns or raises, an end line ``E <job> <attempt> <pid> <outcome> <time>`` to a
file of its own process under ``$VENTURI_CHAOS_RUNS_DIR``. Every outcome names the claim
it came from (attempt and pid: in the result, the carry's trail, the error or the dead
reason), so the harness can prove afterwards that each applied settle came from the
worker that owned the claim.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, TextIO

import msgspec

import venturi
from venturi import Backoff, Context, Priority


class Chaos(msgspec.Struct):
    seq: int
    # Attempts that paused or retried with a carry, in order ("<attempt>:<pid>:<why>").
    trail: list[str] = []
    # How long a slow handler works, in milliseconds.
    ms: int = 0


# Kinds and what their handler dictates in the end (the harness checks the final status).
EXPECTED = {
    "chaos_quick": "completed",
    "chaos_sync": "completed",
    "chaos_pause": "completed",
    "chaos_flaky": "completed",
    "chaos_capped": "completed",
    "chaos_slow": "completed",
    "chaos_stubborn": "completed",
    "chaos_overrun": "completed",
    "chaos_renewed": "completed",
    "chaos_doomed": "dead",
    "chaos_dead": "dead",
}

# The overrun kind's lease, and how long its first run works: past the lease, on purpose.
OVERRUN_LEASE = 1.0
OVERRUN_RUN = 2.5
# The renewing kind: the same overrun, with renew_lease=True.
RENEWED_LEASE = 1.5
RENEWED_RUN = 3.0
CAPPED_CAP = 2
PAUSES = 2

_out: TextIO | None = None


def _file() -> TextIO:
    global _out
    if _out is None:
        path = os.path.join(os.environ["VENTURI_CHAOS_RUNS_DIR"], f"runs-{os.getpid()}.txt")
        # Line-buffered: each record reaches the file with one write(2), so a SIGKILL
        # loses at most the record being written, never an earlier one.
        _out = open(path, "a", buffering=1)
    return _out


def tag(ctx: Context[Any]) -> str:
    """The claim this run belongs to, as every outcome spells it."""
    return f"attempt={ctx.job.attempt} pid={os.getpid()}"


def _start(ctx: Context[Any]) -> None:
    _file().write(
        f"S {ctx.job.id} {ctx.job.attempt} {os.getpid()} {ctx.job.kind} {time.time():.6f}\n"
    )


def _end(ctx: Context[Any], outcome: str) -> None:
    _file().write(f"E {ctx.job.id} {ctx.job.attempt} {os.getpid()} {outcome} {time.time():.6f}\n")


def _done(ctx: Context[Any]) -> venturi.Outcome:
    _end(ctx, "complete")
    return venturi.complete({"a": ctx.job.attempt, "p": os.getpid()})


def _trail(ctx: Context[Any], carry: Chaos, why: str) -> Chaos:
    return Chaos(carry.seq, [*carry.trail, f"{ctx.job.attempt}:{os.getpid()}:{why}"], carry.ms)


async def _work(ctx: Context[Any], seconds: float) -> bool:
    """Work for ``seconds`` unless shutdown asks us to stop first; True when asked."""
    stop = asyncio.ensure_future(ctx.cancelled())
    try:
        await asyncio.wait([stop], timeout=seconds)
    finally:
        stop.cancel()
    return ctx.is_cancelled()


FAST = Backoff.fixed(0.2)


@venturi.task(kind="chaos_quick", backoff=FAST)
async def quick(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """The bulk of the load: completes at once."""
    _start(ctx)
    return _done(ctx)


@venturi.task(kind="chaos_sync", backoff=FAST)
def sync(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A plain def handler: runs in a thread, blocks a little."""
    _start(ctx)
    time.sleep(0.002)  # stays: a handler that blocks its thread is this kind's point
    return _done(ctx)


@venturi.task(kind="chaos_pause", backoff=FAST)
async def pause(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Checkpoints PAUSES times, then completes."""
    _start(ctx)
    if sum(1 for t in carry.trail if t.endswith(":step")) < PAUSES:
        _end(ctx, "pause")
        return venturi.pause(_trail(ctx, carry, "step"))
    return _done(ctx)


@venturi.task(kind="chaos_flaky", backoff=FAST, max_failures=12)
async def flaky(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Raises on its first execution, asks for a retry on its second (odd seqs), then
    completes. Executions lost to a crash count as failures too, so it may skip ahead."""
    _start(ctx)
    if ctx.job.failures == 0:
        _end(ctx, "raise")
        raise RuntimeError(f"flaky {tag(ctx)}")
    if ctx.job.failures == 1 and carry.seq % 2:
        _end(ctx, "retry")
        return venturi.retry(_trail(ctx, carry, "retry"), reason=f"flaky {tag(ctx)}")
    return _done(ctx)


@venturi.task(kind="chaos_doomed", backoff=Backoff.fixed(0.1), max_failures=3)
async def doomed(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Always raises: dead at the backstop of 3 failed executions."""
    _start(ctx)
    _end(ctx, "raise")
    raise ValueError(f"doomed {tag(ctx)}")


@venturi.task(kind="chaos_dead", backoff=FAST)
async def dead(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Gives up at once: dead."""
    _start(ctx)
    _end(ctx, "dead")
    return venturi.dead(f"gave up {tag(ctx)}")


@venturi.task(kind="chaos_capped", cap=CAPPED_CAP, backoff=FAST, priority=Priority.HIGH)
async def capped(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """At most CAPPED_CAP at once per worker; works a few tens of milliseconds."""
    _start(ctx)
    await asyncio.sleep(carry.ms / 1000)  # stays: work that takes time is this kind's point
    return _done(ctx)


@venturi.task(kind="chaos_slow", backoff=FAST, lease=6.0)
async def slow(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Works up to a second; asked to stop (shutdown), it checkpoints: a cooperative pause."""
    _start(ctx)
    if await _work(ctx, carry.ms / 1000):
        _end(ctx, "pause-cancel")
        return venturi.pause(_trail(ctx, carry, "cancel"))
    return _done(ctx)


@venturi.task(kind="chaos_stubborn", backoff=FAST, lease=6.0)
async def stubborn(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Works 1 to 3 s and ignores shutdown: force-released past shutdown_timeout."""
    _start(ctx)
    await asyncio.sleep(carry.ms / 1000)  # stays: work that takes time is this kind's point
    return _done(ctx)


@venturi.task(kind="chaos_overrun", backoff=FAST, lease=OVERRUN_LEASE)
async def overrun(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """Its first run works OVERRUN_RUN seconds, past its lease of OVERRUN_LEASE: with no
    lease renewal, another worker recovers the claim and runs the job again, and this
    run's late completion is refused by the ownership guard."""
    _start(ctx)
    if ctx.job.attempt == 1 and await _work(ctx, OVERRUN_RUN):
        _end(ctx, "pause-cancel")
        return venturi.pause(_trail(ctx, carry, "cancel"))
    return _done(ctx)


@venturi.task(kind="chaos_renewed", backoff=FAST, lease=RENEWED_LEASE, renew_lease=True)
async def renewed(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """The overrun again, with lease renewal: its first run works RENEWED_RUN seconds, twice
    its lease, and the worker's heartbeat keeps the claim, so it runs once."""
    _start(ctx)
    if ctx.job.attempt == 1 and await _work(ctx, RENEWED_RUN):
        _end(ctx, "pause-cancel")
        return venturi.pause(_trail(ctx, carry, "cancel"))
    return _done(ctx)
