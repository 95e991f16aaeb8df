"""Tracing without a current span."""

from __future__ import annotations

from opentelemetry import trace

from tests.support.tracing import exporter
from venturi import tracing


def test_no_span_current_means_no_traceparent() -> None:
    exporter()
    assert tracing.current_traceparent() is None
    with trace.get_tracer("t").start_as_current_span("s") as s:
        tp = tracing.current_traceparent()
    assert tp is not None and tp.split("-")[2] == f"{s.get_span_context().span_id:016x}"
