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

from venturi.context import Context
from venturi.middleware import CallNext
from venturi.outcomes import Complete, Dead, Pause, Retry
from venturi.status import JobStatus

# current_traceparent: re-exported, where it was read before it moved below the context.
from venturi.traceparent import current_traceparent as current_traceparent
from venturi.traceparent import otel_trace

TRACER = "venturi"


def _parent(traceparent: str | None) -> Any:
    """The OpenTelemetry context whose span is the enqueuer's (None: a new trace)."""
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def outcome_of(result: Any) -> str:
    """The outcome a handler's return value asks for, as the span's attribute."""
    if result is None or isinstance(result, Complete):
        return JobStatus.COMPLETED
    if isinstance(result, Retry):
        return "retry"
    if isinstance(result, Pause):
        return "pause"
    if isinstance(result, Dead):
        return JobStatus.DEAD
    return "invalid"  # the worker settles it as a failure


async def run_span(ctx: Context[Any], carry: Any, call_next: CallNext) -> Any:
    """Middleware: one span per run, a child of the span the job was enqueued in."""
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
        except asyncio.CancelledError:
            # A timeout or the worker stopping it: the worker settles it (timed out, or
            # released) once the chain has unwound.
            span.set_attribute("venturi.outcome", "cancelled")
            raise
        except Exception as exc:
            span.set_attribute("venturi.outcome", "failed")
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        span.set_attribute("venturi.outcome", outcome_of(result))
        return result
