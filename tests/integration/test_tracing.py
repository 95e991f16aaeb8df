"""OpenTelemetry: the trace context of an enqueue travels with the job, and the run_span
middleware's span is its child, with the job's attributes and, on failure, the exception.
Spans are captured with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import venturi
from tests.support import running, wait_status
from tests.support.tracing import exporter
from venturi import Context, tracing
from venturi.runtime.worker import Worker


def attrs(item: Any) -> Mapping[str, Any]:
    """A finished span's (or event's) attributes, which the SDK types as optional."""
    assert item.attributes is not None
    return dict(item.attributes)


async def _traceparent(conn: Any, job_id: int) -> str | None:
    # Read-only look at the stored column; not part of the library's reads.
    value = await conn.fetchval("SELECT traceparent FROM venturi.jobs WHERE id = $1", job_id)
    return None if value is None else str(value)


async def test_one_trace_from_an_enqueue_in_a_request_to_the_run(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    spans = exporter()
    spans.clear()

    @venturi.task(kind="t_charge", max_failures=1)
    async def charge(ctx: Context[Any], carry: int) -> Any:
        if carry == 2:
            raise ValueError("card declined")
        if carry == 3:
            return venturi.retry(after=3600)
        return None

    web = trace.get_tracer("the-web-app")
    with web.start_as_current_span("POST /checkout", kind=SpanKind.SERVER) as request:
        ok = await charge.enqueue(conn, 1)
        failing = await charge.enqueue(conn, 2)
        [retried] = await venturi.enqueue_many(conn, [charge.job(3)])
    untraced = await charge.enqueue(conn, 4)  # no span current: no trace context stored
    ctx = request.get_span_context()
    stored = await _traceparent(conn, ok)
    assert stored == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert await _traceparent(conn, retried) == stored
    assert await _traceparent(conn, untraced) is None

    w = Worker(None, dsn, [charge], poll_max=0.2, middleware=[tracing.run_span])
    async with running(w):
        # A retry counts toward the backstop of 1 as a failure does: both end dead.
        for job_id, status in (
            (ok, "completed"),
            (failing, "dead"),
            (retried, "dead"),
            (untraced, "completed"),
        ):
            await wait_status(conn, job_id, status)

    runs = {
        attrs(s)["venturi.job.id"]: s
        for s in spans.get_finished_spans()
        if s.name == "venturi run t_charge"
    }
    assert set(runs) == {ok, failing, retried, untraced}
    for job_id in (ok, failing, retried):
        span = runs[job_id]
        # One trace: the run is a child of the request that enqueued it.
        assert span.context.trace_id == ctx.trace_id
        assert span.parent is not None and span.parent.span_id == ctx.span_id
        assert span.kind == SpanKind.CONSUMER
        assert attrs(span)["venturi.job.kind"] == "t_charge"
        assert attrs(span)["venturi.job.attempt"] == 1
    assert attrs(runs[ok])["venturi.outcome"] == "completed"
    assert attrs(runs[retried])["venturi.outcome"] == "retry"
    bad = runs[failing]
    assert attrs(bad)["venturi.outcome"] == "failed"
    assert bad.status.status_code == StatusCode.ERROR
    [event] = [e for e in bad.events if e.name == "exception"]
    assert attrs(event)["exception.type"] == "ValueError"
    assert attrs(event)["exception.message"] == "card declined"
    # Enqueued outside any span: the run starts a trace of its own.
    assert runs[untraced].parent is None and runs[untraced].context.trace_id != ctx.trace_id
