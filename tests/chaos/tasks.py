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
from venturi import Backoff, Context, Priority, db
from venturi.workflow.suspend import Suspend

from ..support import sql as test_sql


class Chaos(msgspec.Struct):
    seq: int
    # Attempts that paused or retried with a carry, in order ("<attempt>:<pid>:<why>").
    trail: list[str] = []
    # How long a slow handler works, in milliseconds.
    ms: int = 0
    # Workflow kinds: a Workflow node's name ("a", "b", "c"), a child's step name.
    name: str = ""


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
    "chaos_flow": "completed",
    "chaos_child": "completed",
    "chaos_node": "completed",
    # Grouped kinds: declared in tests/chaos/grouptasks.py, run by workers of their own.
    "chaos_group1": "completed",
    "chaos_group3": "completed",
}
WORKFLOW_KINDS = ("chaos_flow", "chaos_child", "chaos_node")

# The overrun kind's lease, and how long its first run works: past the lease, on purpose.
OVERRUN_LEASE = 1.0
OVERRUN_RUN = 2.5
# Failures it may count before it is dead. Its 1 s lease is under what a loop iteration
# takes in `all`'s slow period (66 s, every chunk of every worker delayed 50-500 ms), so
# there most attempts end by a recovery; at the default of 25, a job that met the slow
# period early died of them (the long run on 9ad6996: 25 attempts in 42 s, each run to
# completion but settled after its lease), which is the slow database's doing, not a
# worker's. Past the period, each attempt settles in time.
OVERRUN_FAILURES = 100
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


@venturi.task(
    kind="chaos_overrun", backoff=FAST, lease=OVERRUN_LEASE, max_failures=OVERRUN_FAILURES
)
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


# --- workflows ----------------------------------------------------------------------------
#
# More record lines, beside S and E (the harness's history check reads them):
#   X <job> <step> <pid> <attempt> <time>   a step's function started
#   R <job> <step> <pid> <attempt> <time>   ctx.step returned (its record had committed)
#   G <job> <signal> <pid> <payload> <time> wait_for_signal returned the payload
#   C <job> <children> <pid> <attempt> <time> gather returned every child's result
#   N <job> <node> <pid> <attempt> <time>   the last node of a Workflow read both results
# A step's function may run more than once before its record commits (at least once);
# once the record committed (an R line proves it), it must never start again.

FLOW_SIGNAL = "go"
# A workflow run makes several statements of its own (the replay's read, a signal's,
# a spawn per child, the gather's): under the slow scenario's 50-500 ms per chunk that
# is seconds, so the workflow kinds have a lease well above it, as docs/chaos.md
# advises (the default 4 s lease saw a run return with 0.5 s left to settle).
FLOW_LEASE = 12.0
# Flows whose seq is a multiple of this raise once after their first step is recorded:
# the retry must replay that step, not run it again.
FLOW_FLAKY_EVERY = 3


def _line(kind: str, job: int, what: str, value: object) -> None:
    _file().write(f"{kind} {job} {what} {os.getpid()} {value} {time.time():.6f}\n")


def effect(job: int, step: str, attempt: int) -> str:
    """A step's function with no database write (runs in a thread: a plain def)."""
    _line("X", job, step, attempt)
    return f"{attempt}:{os.getpid()}"


async def effect_in_transaction(conn: Any, job: int, step: str, attempt: int) -> str:
    """A transactional step's function: its write commits with the step's record."""
    _line("X", job, step, attempt)
    await conn.execute(test_sql.statement("chaos_effect_insert"), job, step, os.getpid(), attempt)
    return f"{attempt}:{os.getpid()}"


async def _step(ctx: Context[Any], name: str, transactional: bool = False) -> str:
    fn: Any = effect_in_transaction if transactional else effect
    value: str = await ctx.step(
        name, fn, ctx.job.id, name, ctx.job.attempt, transactional=transactional
    )
    _line("R", ctx.job.id, name, ctx.job.attempt)
    return value


class ChildResult(msgspec.Struct):
    a: int
    p: int


@venturi.task(kind="chaos_child", backoff=FAST, result=ChildResult)
async def child(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A flow's child: works 0 to 200 ms, completes with the claim that ran it."""
    _start(ctx)
    await asyncio.sleep(carry.ms / 1000)  # stays: a child the gather must wait for
    return _done(ctx)


async def _flow(ctx: Context[Any], carry: Chaos) -> None:
    await _step(ctx, "plain")
    if ctx.job.failures == 0 and carry.seq % FLOW_FLAKY_EVERY == 0:
        raise RuntimeError(f"flow fails once after its first step {tag(ctx)}")
    await _step(ctx, "in-transaction", transactional=True)
    await ctx.sleep("nap", carry.ms / 1000)  # stays: the flow's durable timer, soaked
    got = await ctx.wait_for_signal(FLOW_SIGNAL, int)
    _line("G", ctx.job.id, FLOW_SIGNAL, got)
    if got != carry.seq:
        raise RuntimeError(f"signal {FLOW_SIGNAL} carried {got}, not the seq {carry.seq}")
    kids = [
        await ctx.spawn(f"kid-{i}", child, Chaos(carry.seq, ms=(carry.seq * 37 + i * 53) % 200,
                                                  name=f"kid-{i}"))
        for i in range(2 + carry.seq % 2)
    ]  # fmt: skip
    results = await ctx.gather(*kids)
    if not all(isinstance(r, ChildResult) and r.a >= 1 for r in results):
        raise RuntimeError(f"gather returned {results!r}")
    _line("C", ctx.job.id, str(len(results)), ctx.job.attempt)
    await _step(ctx, "after-gather")


async def _workflow_run(ctx: Context[Any], body: Any) -> None:
    """Run ``body``, writing the end record of a run that waits or raises."""
    try:
        await body
    except asyncio.CancelledError:
        raise  # the worker's shutdown: no end record, as for every other kind
    except Exception as exc:
        # A fault (a backend kill, a restart) may cut a primitive's statement: a failed
        # execution like any other, counted apart. The detail names the claim.
        _end(ctx, "raise-db" if isinstance(exc, db.errors.DATABASE_ERRORS) else "raise")
        raise RuntimeError(f"workflow run failed {tag(ctx)}: {type(exc).__name__}: {exc}") from None
    except Suspend:
        _end(ctx, "wait")
        raise
    except BaseException:
        _end(ctx, "raise")
        raise


@venturi.task(kind="chaos_flow", backoff=FAST, max_failures=12, lease=FLOW_LEASE)
async def flow(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A workflow: a step, a transactional step, a durable sleep, a signal the harness
    sends, two or three children gathered, a last step. Its first execution fails once
    after its first step on every third seq."""
    _start(ctx)
    await _workflow_run(ctx, _flow(ctx, carry))
    return _done(ctx)


async def _node(ctx: Context[Any], carry: Chaos) -> None:
    await _step(ctx, f"node-{carry.name}")
    if carry.name == "c":
        a = await ctx.result_of("a")
        b = await ctx.result_of("b")
        if not (isinstance(a, dict) and isinstance(b, dict) and a.get("a") and b.get("a")):
            raise RuntimeError(f"result_of: {a!r}, {b!r}")
        _line("N", ctx.job.id, carry.name, ctx.job.attempt)


@venturi.task(kind="chaos_node", backoff=FAST, lease=FLOW_LEASE)
async def node(ctx: Context[Any], carry: Chaos) -> venturi.Outcome:
    """A node of the three-node Workflow a -> b, (a, b) -> c: a step each; c reads the
    results of a and b."""
    _start(ctx)
    await _workflow_run(ctx, _node(ctx, carry))
    return _done(ctx)
