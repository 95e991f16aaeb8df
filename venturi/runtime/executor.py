"""Running one handler, and turning how it ended into a settlement."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import msgspec

from venturi.blocking import in_thread
from venturi.codecs import encode_any
from venturi.context import Context, Transactions
from venturi.middleware import Middleware, run_through
from venturi.outcomes import Complete, Dead, Pause, Retry
from venturi.runtime import settlement as s
from venturi.runtime.run import Run
from venturi.tasks import Task
from venturi.workflow.suspend import Suspend, Unreplayable

log = logging.getLogger("venturi.worker")


async def run_handler(
    run: Run,
    state: Any,
    transactions: Transactions | None = None,
    middleware: Sequence[Middleware] = (),
    ended: Callable[[], None] | None = None,
    threads: Executor | None = None,
) -> None:
    """Run one handler (inside ``middleware``, the first outermost) and record its
    settlement on ``run``; never raises but for a cancellation by the worker
    (``run.stopped``), which the loop turns into a release. An exception from a
    middleware is a failed execution like one from the handler. ``transactions`` backs
    the context's ``transaction()`` and ``complete()`` and the workflow primitives,
    whose connection is given back when the handler ends. ``ended`` is called last, as
    the task ends (the loop's wake-up: cheaper than a done callback per task).
    ``threads`` runs a plain ``def`` handler (None: asyncio's default executor).

    One coroutine per job on the common path (an async handler, no middleware): the
    handler is awaited here, not through a chain of helpers, each of which cost a frame
    and an await per job (issue 38)."""
    try:
        run.outcome = await _outcome(run, state, transactions, middleware, threads)
    finally:
        try:
            if transactions is not None:
                if transactions.used:
                    await transactions.release()
                else:
                    # A plain job skips release (issue 38) but still ends its context's
                    # primitives: one kept past the run raises one line at the call.
                    transactions.end()
        finally:
            if ended is not None:
                ended()


async def _outcome(
    run: Run,
    state: Any,
    transactions: Transactions | None,
    middleware: Sequence[Middleware],
    threads: Executor | None,
) -> s.Settlement:
    task = run.task
    try:
        carry = task.codec.decode(run.carry_text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return s.Undecodable(f"carry no longer decodes as {task.codec.carry_type!r}: {exc}")
    ctx: Context[Any] = Context.running(state, run, transactions, asyncio.get_running_loop())
    deadline = None
    try:
        if task.timeout is not None:
            async with asyncio.timeout(task.timeout) as deadline:
                result = await _chain(task, ctx, carry, middleware, threads)
        elif middleware or not task.is_async:
            result = await _chain(task, ctx, carry, middleware, threads)
        else:
            # The common path: no timeout context (a timer per job), no helper frames.
            result = await task.fn(ctx, carry)  # type: ignore[misc]
    except TimeoutError:
        if deadline is not None and deadline.expired():
            return s.TimedOut(f"run exceeded its timeout of {task.timeout}s")
        return s.Failed(traceback.format_exc())
    except Suspend as wait:
        return s.Waiting(
            wait.detail,
            wait.seen,
            wait.wake_at,
            wait.signal,
            None if wait.wait_for is None else tuple(wait.wait_for),
        )
    except Unreplayable as bad:
        return s.Undecodable(bad.reason)
    except asyncio.CancelledError:
        if run.stopped is not None:
            raise  # the worker's own cancellation: the loop releases the job
        # The handler awaited something other code cancelled: nothing told it to
        # stop, so it failed, and it must count toward its backstop; a release here
        # would claim and run it again at once, forever.
        return s.Failed(
            "the handler raised CancelledError; the worker did not cancel it\n"
            + traceback.format_exc()
        )
    except Exception as exc:
        return s.Failed(traceback.format_exc(), _not_retried(task, exc))
    if transactions is not None and transactions.used:
        # Spawns the handler made after its last other primitive are written now,
        # before its outcome is settled (a failure here is a failed execution: the next
        # run spawns them again, since nothing of them was written).
        try:
            await transactions.flush()
        except Exception:
            return s.Failed(traceback.format_exc())
    if result is None:
        return s.COMPLETED
    return settlement_of(task, result)


def _not_retried(task: Task[Any], exc: Exception) -> str | None:
    """Why ``exc`` settles the job dead at once: it is not among the task's ``retry_on``
    (None: it is retried)."""
    if task.retry_on is None or isinstance(exc, task.retry_on):
        return None
    names = ", ".join(t.__name__ for t in task.retry_on)
    return f"retry_on: {type(exc).__name__} is not one of ({names}); not retried"


async def _chain(
    task: Task[Any],
    ctx: Context[Any],
    carry: Any,
    middleware: Sequence[Middleware],
    threads: Executor | None,
) -> Any:
    if not middleware:
        return await _call(task, ctx, carry, threads)
    return await run_through(middleware, ctx, carry, lambda: _call(task, ctx, carry, threads))


async def _call(task: Task[Any], ctx: Context[Any], carry: Any, threads: Executor | None) -> Any:
    if task.is_async:
        return await task.fn(ctx, carry)  # type: ignore[misc]
    # A plain def handler runs in a thread of the worker's own (Worker.run).
    result = await in_thread(threads, task.fn, ctx, carry)
    if asyncio.iscoroutine(result):
        result = await result
    return result


def settlement_of(task: Task[Any], result: Any) -> s.Settlement:
    """The settlement of a handler's return value (None is a completion)."""
    if result is None:
        return s.COMPLETED
    try:
        if isinstance(result, Complete):
            if result.result is None:
                return s.COMPLETED
            return s.Completed(encode_any(result.result, "result"))
        if isinstance(result, Pause):
            return s.Paused(task.codec.encode(result.carry), result.at, result.after)
        if isinstance(result, Retry):
            carry = task.codec.encode(result.carry) if result.has_carry else None
            return s.Retried(carry, result.after, result.reason)
        if isinstance(result, Dead):
            return s.Dead(result.reason)
    except (TypeError, ValueError) as exc:
        return s.Failed(f"handler returned an outcome that cannot be stored: {exc}")
    return s.Failed(
        f"handler returned {type(result).__name__} {result!r:.200}, not an outcome: "
        "return venturi.complete(), pause(), retry(), dead() or None"
    )


def ending(handle: asyncio.Task[None], run: Run) -> s.Settlement:
    """The settlement of a handler's finished task: what it recorded, or what its task's
    end says (cancelled by the worker: released; anything else: failed). A job the
    handler completed in its own committed transaction is settled, however it ended."""
    if run.committed:
        other = ending_after_commit(handle, run)
        if other is not None:
            log.warning(
                "job %d (%s) was completed in the handler's own transaction; the handler "
                "then ended with %s, which is ignored",
                run.id,
                run.task.kind,
                other,
                extra=run.log_extra(),
            )
        return s.COMMITTED
    if handle.cancelled():
        if run.stopped is not None:
            return s.Released(run.stopped)
        return s.Failed("the handler's task was cancelled, not by the worker")
    if (exc := handle.exception()) is not None:
        return s.Failed("".join(traceback.format_exception(exc)))
    if run.outcome is None:
        return s.Failed("handler ended without an outcome")
    return run.outcome


def ending_after_commit(handle: asyncio.Task[None], run: Run) -> str | None:
    """How a handler that completed its job in its own transaction ended, if not with a
    completion (its worker ignores it): the name of that ending, or None."""
    if handle.cancelled():
        return "a cancellation"
    if (exc := handle.exception()) is not None:
        return f"{type(exc).__name__}: {exc}"
    outcome = run.outcome
    if outcome is None or type(outcome) is s.Completed:
        return None
    return outcome.name
