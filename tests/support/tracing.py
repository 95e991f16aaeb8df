"""The process's one OpenTelemetry tracer provider, for the tests that read spans."""

from __future__ import annotations

import functools

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@functools.cache
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider (OpenTelemetry allows one), sending every span here:
    the unit and the integration tests share it when they run in one process."""
    found = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(found))
    trace.set_tracer_provider(provider)
    return found
