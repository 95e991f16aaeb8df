"""OpenTelemetry (the ``otel`` extra, ``opentelemetry-api``): the trace context of an
enqueue travels with its job, and ``run_span`` opens each run's span inside that trace.

Enqueue stores the W3C ``traceparent`` of the span current at the call (a column of the
job, NULL when there is none) at the cost of one look-up of the current span; without
opentelemetry-api installed, the cost is one cached failed import, done once. The worker
passes it to the handler's context (``ctx.job.traceparent``); the ``run_span`` middleware
(``Worker(middleware=[venturi.tracing.run_span])``) opens a CONSUMER span for the run as
a child of the enqueuer's span, so one trace runs from a request's enqueue to the run in
the worker, with the job's id, kind, attempt and outcome as attributes and the exception
recorded on failure. Spans go wherever the application's tracer provider sends them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from venturi.codecs import encode_any
from venturi.context import Context
from venturi.middleware import CallNext
from venturi.outcomes import Complete, Dead, Pause, Retry
from venturi.status import JobStatus

# current_traceparent: re-exported, where it was read before it moved below the context.
from venturi.traceparent import current_traceparent as current_traceparent
from venturi.traceparent import otel_trace
from venturi.workflow.suspend import Suspend, Unreplayable

TRACER = "venturi"


def _parent(traceparent: str | None) -> Any:
    """The OpenTelemetry context whose span is the enqueuer's (None: a new trace)."""
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


# What each run's span says, named as the worker's settlements (the ``outcome`` label of
# venturi_jobs_settled_total): these end the run in failure, and set the span's status to
# ERROR; the rest (completed, pause, waiting, release, cancelled) leave it unset.
FAILURES = frozenset({"failed", "timed-out", "retry", JobStatus.DEAD, "undecodable"})


def outcome_of(result: Any) -> str:
    """The outcome a handler's return value settles as (``failed``: not an outcome)."""
    if result is None or isinstance(result, Complete):
        return JobStatus.COMPLETED
    if isinstance(result, Retry):
        return "retry"
    if isinstance(result, Pause):
        return "pause"
    if isinstance(result, Dead):
        return JobStatus.DEAD
    return "failed"


def _raised(ctx: Context[Any], exc: BaseException) -> tuple[str, str]:
    """The outcome of a run that raised ``exc`` through the chain, and why, as the
    executor settles it."""
    if isinstance(exc, Suspend):
        return "waiting", exc.detail
    if isinstance(exc, Unreplayable):
        return "undecodable", exc.reason
    if isinstance(exc, asyncio.CancelledError):
        # The worker sets the run's stop reason before it cancels (a release); the only
        # other cancel of the run's own task is its timeout. A CancelledError the
        # handler met without either is a failure.
        # Read off the worker's run behind the context (venturi.runtime.run.Run), which
        # holds what the settlement is made from; a context made by hand has none.
        run = getattr(ctx, "_run", None)
        stopped = getattr(run, "stopped", None)
        if stopped is not None:
            return "release", str(stopped)
        limit = getattr(getattr(run, "task", None), "timeout", None)
        task = asyncio.current_task()
        if limit is not None and task is not None and task.cancelling():
            return "timed-out", f"run exceeded its timeout of {limit}s"
    return "failed", f"{type(exc).__name__}: {exc}"


def _unstorable(ctx: Context[Any], result: Any) -> str | None:
    """Why the outcome ``result`` cannot be stored (its result, or its carry as the task
    encodes it), or None: the executor then settles it as a failure. Encoded twice with
    tracing on, once here, once by the executor."""
    task = getattr(getattr(ctx, "_run", None), "task", None)
    try:
        if isinstance(result, Complete) and result.result is not None:
            encode_any(result.result, "result")
        elif task is not None and isinstance(result, Pause):
            task.codec.encode(result.carry)
        elif task is not None and isinstance(result, Retry) and result.has_carry:
            task.codec.encode(result.carry)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def _operator_cancelled(ctx: Context[Any]) -> bool:
    """Did an operator cancel the job while it ran? Then any ending but a completion
    settles as cancelled."""
    return bool(getattr(getattr(ctx, "_run", None), "cancel_requested", False))


async def run_span(ctx: Context[Any], carry: Any, call_next: CallNext) -> Any:
    """Middleware: one span per run, a child of the span the job was enqueued in, its
    ``venturi.outcome`` the settlement the run ends in (``FAILURES`` set ERROR)."""
    trace = otel_trace()
    if trace is None:
        return await call_next()
    from opentelemetry.trace import SpanKind, Status, StatusCode

    job = ctx.job
    tracer = trace.get_tracer(TRACER)
    attributes = {
        "messaging.system": "venturi",
        "messaging.operation": "process",
        "venturi.job.id": job.id,
        "venturi.job.kind": job.kind,
        "venturi.job.attempt": job.attempt,
    }
    with tracer.start_as_current_span(
        f"venturi run {job.kind}",
        context=_parent(job.traceparent),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            result = await call_next()
        except BaseException as exc:
            outcome, why = _raised(ctx, exc)
            if isinstance(exc, Exception):
                span.record_exception(exc)
            _end(span, ctx, outcome, why, Status, StatusCode)
            raise
        outcome = outcome_of(result)
        refused = _unstorable(ctx, result)
        if refused is not None:
            # The executor settles it as a failure: what the span says must agree.
            outcome, why = "failed", f"handler returned an outcome that cannot be stored: {refused}"
        elif isinstance(result, Retry | Dead):
            why = result.reason or outcome
        else:
            why = f"handler returned {type(result).__name__}, not an outcome"
        _end(span, ctx, outcome, why, Status, StatusCode)
        return result


def _end(span: Any, ctx: Context[Any], outcome: str, why: str, status: Any, code: Any) -> None:
    """Set the span's outcome, and its status ERROR when that is a failure."""
    if outcome != JobStatus.COMPLETED and _operator_cancelled(ctx):
        outcome = JobStatus.CANCELLED
    span.set_attribute("venturi.outcome", outcome)
    if outcome in FAILURES:
        span.set_status(status(code.ERROR, why or outcome))
