"""``ctx.step``: a function run once and its value recorded."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from venturi import db
from venturi.blocking import BlockingConnection, in_step_thread
from venturi.codecs import encode_any, is_model_type, lossy_fields
from venturi.errors import VenturiError
from venturi.workflow.records import decode, decoder, return_type
from venturi.workflow.run import WorkflowRun
from venturi.workflow.suspend import Unreplayable


class _Lost(Exception):
    """A transactional step's record lost to another run's: roll its writes back."""


async def step(
    run: WorkflowRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    transactional: bool,
) -> Any:
    """Run ``fn(*args)`` once and record its value under ``name``; on a later run, the
    recorded value (decoded as ``fn``'s return annotation), without running ``fn``."""
    name = run.records.claim(name, "ctx.step")
    if not callable(fn):
        raise VenturiError(f"ctx.step({name!r}): fn must be callable, got {fn!r}")
    what = f"step {name!r} of job {run.job_id}"
    type_ = return_type(fn)
    decoder(type_, what)  # a type msgspec cannot decode: dead before fn runs
    recorded = (await run.load()).get(name)
    if recorded is not None:
        return decode(recorded.value, type_, what)
    # The steps were read at the run's first primitive: a run that lost its claim since
    # may not know of a record its job's newer run made.
    run.still_claimed(what)
    lost = lossy_fields(type_) if is_model_type(type_) else ""
    if lost:
        # Its value would be refused once fn ran, and fn run again on every retry.
        raise Unreplayable(f"{what}: {type_.__qualname__} cannot be stored as it is: {lost}")
    if transactional:
        return decode(await _transactional(run, name, fn, args), type_, what)
    value = await _call(fn, args)
    text = encode_any(value, f"the value of {what}")
    return decode((await run.record(name, text)).value, type_, what)


async def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    # A plain function runs in a thread, like a sync handler: it may block. Not the
    # sync handlers' own pool, where the handler waiting for it may hold the last thread.
    result = await in_step_thread(fn, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _call_in_transaction(fn: Callable[..., Any], conn: Any, args: tuple[Any, ...]) -> Any:
    """``fn(conn, *args)``: awaited for an async ``fn``; a plain function runs in a
    thread with the connection as a ``BlockingConnection`` (its calls return)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(conn, *args)
    wrapped = BlockingConnection(conn, asyncio.get_running_loop())
    result = await in_step_thread(fn, wrapped, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _transactional(
    run: WorkflowRun, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
) -> str:
    """``fn(conn, *args)`` and the step's record in one transaction: the writes commit
    once, with the record; if another run recorded the step first, they roll back and
    its value is returned."""
    if run.link.shared:
        raise VenturiError(
            "ctx.step(transactional=True) needs a pool: this worker runs on one shared "
            "connection (venturi.testing.drain on a Connection); give it a DSN or a Pool"
        )
    steps = await run.load()
    won: db.workflow.Recorded | None = None
    try:
        async with db.connect.transaction(await run.connection()) as conn:
            run.link.holding = True
            try:
                value = await _call_in_transaction(fn, conn, args)
            finally:
                run.link.holding = False
            text = encode_any(value, f"the value of step {name!r} of job {run.job_id}")
            won, inserted = await db.workflow.step_record(
                conn, schema=run.schema, job_id=run.job_id, name=name, value=text
            )
            if not inserted:
                raise _Lost
    except _Lost:
        pass
    assert won is not None
    steps[name] = won
    return won.value
