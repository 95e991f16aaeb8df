"""The W3C trace context (``traceparent``) of the span current at a call, read off
OpenTelemetry when ``opentelemetry-api`` is installed (the ``otel`` extra): what an
enqueue, a spawn and a Workflow store with their jobs. Below ``venturi.tracing`` (the
run's span, a middleware over ``Context``) so that the workflow primitives, which
``Context`` calls, can read it without importing the context back."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def otel_trace() -> Any:
    """``opentelemetry.trace``, or None when opentelemetry-api is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, or None (no valid span, or no otel)."""
    trace = otel_trace()
    if trace is None:
        return None
    span = trace.get_current_span().get_span_context()
    if not span.is_valid:
        return None
    return f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}"
