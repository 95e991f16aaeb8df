"""Middleware: code that wraps every run of a handler (a tracing span, an error
reporter, a database session per job).

A middleware is ``async def mw(ctx, carry, call_next)``: ``await call_next()`` runs the
rest of the chain and then the handler (a plain ``def`` handler runs in its thread, and
``call_next`` awaits it), and returns what the handler returned, which the middleware
returns in turn (or an outcome of its own). ``Worker(middleware=[a, b])`` runs ``a``
around ``b`` around the handler. An exception a middleware raises, before or after
``call_next``, is a failed execution of that run, exactly like one the handler raises;
the task's timeout covers the whole chain.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

from venturi.context import Context, JobMeta
from venturi.db.errors import one_line
from venturi.errors import ConfigError
from venturi.validate import shown

CallNext = Callable[[], Awaitable[Any]]
Middleware = Callable[[Context[Any], Any, CallNext], Awaitable[Any]]


def _is_middleware(mw: Any) -> bool:
    fn = mw if inspect.isfunction(mw) or inspect.ismethod(mw) else getattr(mw, "__call__", None)  # noqa: B004
    return fn is not None and inspect.iscoroutinefunction(fn)


def check(middleware: Iterable[Any]) -> list[Middleware]:
    """Each middleware must be an ``async def`` taking (ctx, carry, call_next);
    ``ConfigError`` names the one that is not."""
    checked = []
    for i, mw in enumerate(middleware):
        if not _is_middleware(mw):
            raise ConfigError(
                f"middleware[{i}] must be an async def mw(ctx, carry, call_next), got {mw!r}"
            )
        checked.append(mw)
    return checked


def load(spec: str) -> Middleware:
    """The middleware ``MODULE:ATTR`` names (``venturi.tracing:run_span``), imported from
    the current directory too, as the worker's own module is; ``ConfigError`` in one line
    saying what is wrong, for a worker's command line to refuse before it starts."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise ConfigError(f"must be MODULE:ATTR, e.g. venturi.tracing:run_span, got {shown(spec)}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {one_line(exc)}") from None
    except Exception as exc:  # the application's module is broken: say how, in one line
        raise ConfigError(
            f"importing {module_name!r} raised {type(exc).__name__}: {one_line(exc)}"
        ) from None
    finally:
        sys.path.pop(0)
    if not hasattr(module, attr):
        raise ConfigError(f"module {module_name!r} has no attribute {attr!r}")
    found = getattr(module, attr)
    if not _is_middleware(found):
        raise ConfigError(
            f"{spec} must be an async def mw(ctx, carry, call_next), got {shown(found)}"
        )
    return cast(Middleware, found)


async def run_through(
    chain: Sequence[Middleware], ctx: Context[Any], carry: Any, handler: CallNext
) -> Any:
    """Run ``handler`` inside ``chain``, the first middleware outermost."""

    def step(i: int) -> CallNext:
        if i == len(chain):
            return handler

        async def call_next() -> Any:
            return await chain[i](ctx, carry, step(i + 1))

        return call_next

    return await step(0)()


Report = Callable[[BaseException, JobMeta], Awaitable[None] | None]

log = logging.getLogger("venturi.middleware")


def report_errors(report: Report) -> Middleware:
    """A middleware that hands every exception of a run to ``report(exc, ctx.job)``
    (an error tracker's capture call, sync or async) and re-raises it, so the run still
    fails as it would have. A report that itself raises is logged, never the run's
    failure."""

    async def reporting(ctx: Context[Any], carry: Any, call_next: CallNext) -> Any:
        try:
            return await call_next()
        except Exception as exc:
            try:
                sent = report(exc, ctx.job)
                if inspect.isawaitable(sent):
                    await sent
            except Exception:
                log.warning(
                    "the error reporter raised while reporting job %d",
                    ctx.job.id,
                    exc_info=True,
                    extra={"job_id": ctx.job.id, "kind": ctx.job.kind, "attempt": ctx.job.attempt},
                )
            raise

    return reporting
