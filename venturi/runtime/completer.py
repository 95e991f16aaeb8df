"""Settling: the queue of finished runs, written to the database by one ``match``.

A run leaves the queue, freeing its slot, only once its settlement is written or found
to have lost its claim. Completions may ride the next claim instead (``job_claim``
settles them in the same statement). A database that refuses one settlement's write
must not wedge the others: after such an error the queue is settled one run per
statement, and the refused one becomes a failed execution (or dead, or is left to lease
expiry).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from venturi import db
from venturi.backoff import Backoff
from venturi.codecs import text_safe
from venturi.db.conn import Conn
from venturi.errors import exception_line, exception_of
from venturi.runtime.config import KindPolicy
from venturi.runtime.inflight import InFlight
from venturi.runtime.instruments import Instruments
from venturi.runtime.run import Run
from venturi.runtime.settlement import (
    Cancelled,
    Committed,
    Completed,
    Dead,
    Failed,
    Paused,
    Released,
    Retried,
    TimedOut,
    Undecodable,
    Waiting,
)
from venturi.status import JobStatus, JournalEvent

log = logging.getLogger("venturi.worker")


def _by_id(run: Run) -> int:
    return run.id


def error_of(error: str, timed_out: bool = False) -> tuple[str, str]:
    """The exception type and message of a failed execution, for its log line (the
    traceback itself is in the journal): the exception its traceback ends with, its whole
    message on one line (``errors.exception_of``); a reason that is no traceback is the
    message of type ``Error``."""
    if timed_out:
        return "TimeoutError", error
    return exception_of(error) or ("Error", exception_line(error))


def log_ended(run: Run, how: str, error: tuple[str, str], status: str, delay: float) -> None:
    """The line of an execution that ended short of completing (``error``: the type and
    message of ``error_of``): INFO while the job will be retried, WARNING once it is
    dead, so that alerting on warnings sees every job that will not run again."""
    kind, message = error
    then = "now dead" if status == JobStatus.DEAD else f"retry in {delay:.1f}s"
    log.log(
        logging.WARNING if status == JobStatus.DEAD else logging.INFO,
        "job %d (%s) attempt %d %s: %s; %s",
        run.id,
        run.task.kind,
        run.attempt,
        how,
        f"{kind}: {message}" if message else kind,
        then,
        extra={**run.log_extra(), "error_type": kind, "error_message": message},
    )


def ended_as(name: str, status: str | None) -> str | None:
    """What a failed execution (``name``: failed, retry, timed-out) counts as, from the
    job's ``status`` after it: ``dead`` or ``cancelled`` when it ended the job, so that
    the stop line's and the metrics' dead are every job this worker saw go dead; None
    when the claim was lost."""
    if status is None:
        return None
    return status if status in (JobStatus.DEAD, JobStatus.CANCELLED) else name


class Completer:
    """Writes the settlements of this run's finished jobs under ``claimant``'s token.
    Settling a run gives its slot back to ``slots``."""

    def __init__(
        self,
        schema: str,
        claimant: db.Claimant,
        policies: Mapping[str, KindPolicy],
        failures_to_dead: bool,
        instruments: Instruments,
        slots: InFlight,
        synchronous_commit: bool = True,
    ) -> None:
        self.schema = schema
        # Worker(synchronous_commit=False): completions written here (not those a
        # handler's own transaction writes) commit without waiting for the WAL flush.
        self.synchronous_commit = synchronous_commit
        self.claimant = claimant
        self.policies = policies
        self.failures_to_dead = failures_to_dead
        self.stats = instruments.stats
        self._m = instruments.prom
        self.slots = slots
        self.unsettled: list[Run] = []

    def take(self, ended: Iterable[Run]) -> None:
        """Queue runs whose handler ended (``InFlight.reap``) for their settlement."""
        for run in ended:
            self.unsettled.append(run)
            if type(run.outcome) is Committed:
                # Written by the handler's own transaction (ctx.complete): nothing to do.
                self.finish(run, Committed.name)

    def completes(self) -> list[Run]:
        """The queued completions (they may ride the next claim), in id order: the order
        their rows are locked in, as an operator's bulk statements lock theirs (in the
        order the handlers ended, a bulk cancel deadlocked with them)."""
        done = [r for r in self.unsettled if type(r.outcome) is Completed]
        done.sort(key=_by_id)
        return done

    def queue(self, run: Run) -> None:
        """Queue a run the worker stopped waiting for (its outcome already set)."""
        self.unsettled.append(run)

    async def settle(self, conn: Conn, completes: bool = True, isolate: bool = False) -> None:
        """Write queued settlements (completions too, unless ``completes`` is False because
        they will ride the next claim). ``isolate`` settles one run per statement."""
        if not self.unsettled:
            return
        if isolate:
            for run in list(self.unsettled):
                await self._settle_isolated(conn, run)
            return
        done = self.completes() if completes else []
        if done:
            settled = await db.settle.job_complete_many_if_owned(
                conn,
                schema=self.schema,
                claimant=self.claimant,
                ids=[r.id for r in done],
                attempts=[r.attempt for r in done],
                results=[r.result() for r in done],
                synchronous_commit=self.synchronous_commit,
            )
            self.completed(done, settled)
        waits = [r for r in self.unsettled if type(r.outcome) is Waiting and not r.cancel_requested]
        if len(waits) > 1:
            await self._settle_waits(conn, waits)
        for run in [r for r in self.unsettled if type(r.outcome) is not Completed]:
            self.finish(run, await self._settle_one(conn, run))

    async def _settle_waits(self, conn: Conn, runs: list[Run]) -> None:
        """Settle runs that wait in one statement (a fan-out's parents give up their
        slots together); each one alone would be a round trip and a commit."""
        waits = []
        for run in runs:
            w = run.outcome
            assert type(w) is Waiting
            waits.append(
                db.workflow.Wait(
                    run.id,
                    run.attempt,
                    w.seen,
                    w.wake_at,
                    w.signal,
                    w.wait_for,
                    text_safe(w.detail),
                )
            )
        settled = await db.workflow.job_wait_many_if_owned(
            conn, schema=self.schema, claimant=self.claimant, waits=waits
        )
        for run in runs:
            self.finish(run, Waiting.name if run.id in settled else None)

    def completed(self, runs: Iterable[Run], settled: AbstractSet[int]) -> None:
        """These completions were written; those in ``settled`` applied."""
        runs = list(runs)
        if not runs:
            return
        # One pass over the queue for the batch, not a list.remove per run.
        gone = set(runs)
        self.unsettled = [r for r in self.unsettled if r not in gone]
        name = Completed.name
        if self._m or log.isEnabledFor(logging.DEBUG):
            for r in runs:
                self._finished(r, name if r.id in settled else None)
            return
        # No metrics, no debug line (the common case): what _finished does per run, with
        # the slots given back and the count added once for the batch (issue 38).
        applied = [r for r in runs if r.id in settled]
        if applied:
            self.slots.vacate_many(applied)
            self.stats[name] += len(applied)
        if len(applied) < len(runs):
            for r in runs:
                if r.id not in settled:
                    self._finished(r, None)

    def finish(self, run: Run, written: str | None) -> None:
        """The run is settled: ``written`` is what its settlement counts as (see
        ``_settle_one``), None when its claim was lost and nothing was written."""
        self.unsettled.remove(run)
        self._finished(run, written)

    def _finished(self, run: Run, written: str | None) -> None:
        """``finish`` once the run has left the queue: its slot back, its counts."""
        self.slots.vacate(run)
        if self._m and written is not None:
            self._m.settled.labels(run.task.kind, written).inc()
        elif self._m:
            self._m.ownership_lost.labels(run.task.kind).inc()
        if written is not None:
            self.stats[written] += 1
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "settled job %d (%s) as %s",
                    run.id,
                    run.task.kind,
                    written,
                    extra=run.log_extra(),
                )
            return
        self.stats["ownership_lost"] += 1
        log.warning(
            "skipped settling job %d (%s) as %s: this worker no longer holds its claim "
            "(it was recovered or reclaimed)",
            run.id,
            run.task.kind,
            run.outcome.name if run.outcome else "?",
            extra=run.log_extra(),
        )

    async def _settle_isolated(self, conn: Conn, run: Run) -> None:
        try:
            self.finish(run, await self._settle_one(conn, run))
            return
        except db.errors.RETRYABLE:
            raise
        except db.errors.STATEMENT_ERROR as exc:
            refused = f"the database refused to store this outcome: {db.errors.one_line(exc)}"
        log.error("job %d (%s): %s", run.id, run.task.kind, refused, extra=run.log_extra())
        # Settle it as a failed execution, keeping the pre-run carry; if even that is
        # refused, dead; if that too, leave it to lease expiry rather than loop.
        run.outcome = Failed(refused)
        written: str | None
        try:
            written = await self._settle_one(conn, run)
        except db.errors.RETRYABLE:
            raise
        except db.errors.STATEMENT_ERROR:
            run.outcome = Dead("outcome could not be stored")
            try:
                written = await self._settle_one(conn, run)
            except db.errors.RETRYABLE:
                raise
            except db.errors.STATEMENT_ERROR:
                written = None
        self.finish(run, written)

    async def _settle_one(self, conn: Conn, run: Run) -> str | None:
        """Write one run's settlement. Returns what it counts as in the worker's stats
        and metrics: the settlement's name, but ``dead`` (or ``cancelled``) for a failed
        execution that ended the job; None when the claim was lost."""
        outcome = run.outcome
        assert outcome is not None
        me, sch, job_id, attempt = self.claimant, self.schema, run.id, run.attempt
        if run.cancel_requested and type(outcome) is not Completed:
            # An operator cancelled it and the handler stopped short of completing.
            outcome = run.outcome = Cancelled(
                f"cancelled by an operator; the handler ended with {outcome.name}"
            )
        match outcome:
            case Committed():
                return outcome.name  # the handler's own transaction wrote it
            case Completed(result):
                settled = await db.settle.job_complete_many_if_owned(
                    conn,
                    schema=sch,
                    claimant=me,
                    ids=[job_id],
                    attempts=[attempt],
                    results=[result],
                    synchronous_commit=self.synchronous_commit,
                )
                ok = job_id in settled
            case Cancelled(detail):
                ok = await db.settle.job_cancel_if_owned(
                    conn, schema=sch, claimant=me, job_id=job_id, attempt=attempt, detail=detail
                )
            case Paused(carry, at, after):
                ok = await db.settle.job_pause_if_owned(
                    conn,
                    schema=sch,
                    claimant=me,
                    job_id=job_id,
                    attempt=attempt,
                    carry=carry,
                    at=at,
                    after=after,
                )
            case Dead(reason) | Undecodable(reason):
                # No retry loop for an undecodable carry: it will not decode later either.
                ok = await db.settle.job_dead_if_owned(
                    conn,
                    schema=sch,
                    claimant=me,
                    job_id=job_id,
                    attempt=attempt,
                    reason=text_safe(reason),
                )
                if ok:
                    log_ended(run, outcome.name, error_of(reason), JobStatus.DEAD, 0.0)
            case Waiting(detail, seen, wake_at, signal, wait_for):
                status = await db.workflow.job_wait_if_owned(
                    conn,
                    schema=sch,
                    claimant=me,
                    job_id=job_id,
                    attempt=attempt,
                    seen=seen,
                    wake_at=wake_at,
                    signal=signal,
                    wait_for=wait_for,
                    detail=text_safe(detail),
                )
                ok = status is not None
            case Released(detail):
                ok = await db.settle.job_release_if_owned(
                    conn, schema=sch, claimant=me, job_id=job_id, attempt=attempt, detail=detail
                )
            case Retried():
                return ended_as(outcome.name, await self._retry(conn, run, outcome))
            case Failed() | TimedOut():
                return ended_as(outcome.name, await self._fail(conn, run, outcome))
        return outcome.name if ok else None

    async def _retry(self, conn: Conn, run: Run, outcome: Retried) -> str | None:
        """The handler asked for a retry: a failed execution, after its own delay (or the
        kind's backoff), with the carry it gave. Returns the job's status after it (None:
        the claim was lost)."""
        delay = outcome.after
        if delay is None:
            delay = self._backoff(run).delay(run.failures + 1)
        status = await db.settle.job_fail_if_owned(
            conn,
            schema=self.schema,
            claimant=self.claimant,
            job_id=run.id,
            attempt=run.attempt,
            event=JournalEvent.RETRIED,
            error=text_safe(outcome.reason) or "handler asked for a retry",
            carry=outcome.carry,
            delay=delay,
            force_dead=False,
        )
        if status == JobStatus.DEAD:  # the failure backstop
            log_ended(run, outcome.name, error_of(outcome.reason), status, delay)
        return status

    async def _fail(self, conn: Conn, run: Run, outcome: Failed | TimedOut) -> str | None:
        """A failed (or timed-out) execution: retried after the kind's backoff, or dead
        (``failures_to_dead``, a ``retry_on`` miss, the last allowed failure). Returns the
        job's status after it (None: the claim was lost)."""
        delay = self._backoff(run).delay(run.failures + 1)
        dead_reason = outcome.dead if type(outcome) is Failed else None
        force = dead_reason is not None or (self.failures_to_dead and type(outcome) is Failed)
        status = await db.settle.job_fail_if_owned(
            conn,
            schema=self.schema,
            claimant=self.claimant,
            job_id=run.id,
            attempt=run.attempt,
            event=outcome.name,
            error=text_safe(outcome.error),
            carry=None,
            delay=delay,
            force_dead=force,
            dead_reason=dead_reason,
        )
        if status is None:
            return None
        log_ended(
            run, outcome.name, error_of(outcome.error, type(outcome) is TimedOut), status, delay
        )
        return status

    def _backoff(self, run: Run) -> Backoff:
        """The kind's retry backoff: the task's own, else this worker's default."""
        return self.policies[run.task.kind].backoff

    async def written_already(self, conn: Conn) -> None:
        """After a failed statement: settle as completed the queued completions it wrote
        before its answer was lost (a claim they rode commits, then its connection dies).
        Sent again they would match nothing, their claim token cleared by the completion,
        and count as claims lost to another worker."""
        done = self.completes()
        if not done:
            return
        written = await db.settle.job_completed_at_attempt(
            conn, schema=self.schema, ids=[r.id for r in done], attempts=[r.attempt for r in done]
        )
        if written:
            self.completed([r for r in done if r.id in written], written)

    async def release_orphans(self, conn: Conn, running: list[int]) -> None:
        """Release jobs claimed under this run's token that it is not running."""
        rows = await db.settle.job_release_orphans_if_owned(
            conn, schema=self.schema, claimant=self.claimant, running=running
        )
        for row in rows:
            self.stats["orphans_released"] += 1
            log.warning(
                "released job %d (%s): claimed by a statement whose answer was lost",
                row["id"],
                row["kind"],
                extra={"job_id": row["id"], "kind": row["kind"], "attempt": row["attempt"]},
            )
