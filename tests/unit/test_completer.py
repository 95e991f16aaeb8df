"""The settlement mapping (no database: a fake connection names each statement): which
statement writes each settlement, with which event, delay and dead flag; an operator's
cancel request wins over any ending short of a completion; a claim lost is counted, not
settled; every settled run gives its slot back."""

from __future__ import annotations

import traceback
from collections import Counter
from typing import Any

import pytest

from tests.support.carries import noop_task
from tests.support.fakes import FakeConn, run_of
from venturi import Backoff, sql
from venturi.db.claims import Claimant
from venturi.errors import ChildFailed, exception_line
from venturi.runtime import settlement as s
from venturi.runtime.completer import Completer, error_of
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.heartbeat import Heartbeat
from venturi.runtime.inflight import InFlight
from venturi.runtime.instruments import Instruments
from venturi.runtime.run import Run
from venturi.status import JobStatus, JournalEvent

DSN = "postgresql://nowhere.invalid/none"

# job_fail_if_owned's parameters, by position: $1 token, $2 id, $3 attempt, $4 event,
# $5 error, $6 carry, $7 delay, $8 force dead, $9 dead reason.
EVENT, CARRY, DELAY, FORCE = 3, 5, 6, 7


def _owned(args: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [{"id": args[1], "status": JobStatus.PENDING}]


def _completer(*tasks: Any, **knobs: Any) -> tuple[Completer, InFlight]:
    config = WorkerConfig.build(DSN, **knobs)
    regs = [Registration.check(t, None, None, None, None) for t in tasks]
    kinds = policies(regs, config)
    inst = Instruments(False)
    claimant = Claimant("w")
    inflight = InFlight(None, kinds, lambda: None, inst, config.schema, claimant)
    completer = Completer(config.schema, claimant, kinds, config.failures_to_dead, inst, inflight)
    return completer, inflight


def _queued(completer: Completer, inflight: InFlight, *runs: Run) -> None:
    """Runs that ended, queued for their settlement, each holding its slot."""
    for run in runs:
        inflight.per_kind[run.task.kind] += 1
    completer.take(runs)


def _answering() -> FakeConn:
    """Every claim still held: each statement answers with its row."""
    names = [
        "job_pause_if_owned",
        "job_fail_if_owned",
        "job_dead_if_owned",
        "job_release_if_owned",
        "job_cancel_if_owned",
    ]
    return FakeConn(
        sql.DEFAULT_SCHEMA,
        job_complete_many_if_owned=lambda args: [{"id": i} for i in args[1]],
        **dict.fromkeys(names, _owned),
    )


async def test_each_settlement_is_written_by_its_statement(kinds: list[str]) -> None:
    task = noop_task("sm_each", backoff=Backoff.fixed(7))
    completer, inflight = _completer(task)
    outcomes = [
        s.Completed('{"r": 1}'),
        s.Completed(),
        s.Paused('{"n": 2}', None, 5.0),
        s.Retried(None, None, "again"),
        s.Failed("boom"),
        s.TimedOut("slow"),
        s.Dead("no"),
        s.Undecodable("bad carry"),
        s.Released("stopping"),
        s.Cancelled("by an operator"),
    ]
    runs = [run_of(task, i, outcome=o) for i, o in enumerate(outcomes, 1)]
    _queued(completer, inflight, *runs)
    conn = _answering()
    await completer.settle(conn)
    assert [(name, args[1]) for name, args in conn.calls] == [
        ("job_complete_many_if_owned", [1, 2]),  # the completions in one statement
        ("job_pause_if_owned", 3),
        ("job_fail_if_owned", 4),
        ("job_fail_if_owned", 5),
        ("job_fail_if_owned", 6),
        ("job_dead_if_owned", 7),
        ("job_dead_if_owned", 8),
        ("job_release_if_owned", 9),
        ("job_cancel_if_owned", 10),
    ]
    [complete] = conn.named("job_complete_many_if_owned")
    assert list(complete[3]) == ['{"r": 1}', None]  # the results stored
    fails = conn.named("job_fail_if_owned")
    assert [a[EVENT] for a in fails] == [
        JournalEvent.RETRIED,
        JournalEvent.FAILED,
        JournalEvent.TIMED_OUT,
    ]
    # The kind's backoff sets the delay of a retry that named none.
    assert [a[DELAY] for a in fails] == [7, 7, 7]
    assert [a[FORCE] for a in fails] == [False, False, False]
    assert completer.unsettled == [] and +inflight.per_kind == Counter()
    assert completer.stats["completed"] == 2 and completer.stats["timed-out"] == 1


async def test_a_retry_keeps_its_own_delay_and_carry(kinds: list[str]) -> None:
    task = noop_task("sm_retry", backoff=Backoff.fixed(7))
    completer, inflight = _completer(task)
    _queued(completer, inflight, run_of(task, outcome=s.Retried('{"n": 9}', 42.0, "later")))
    conn = _answering()
    await completer.settle(conn)
    [args] = conn.named("job_fail_if_owned")
    assert (args[CARRY], args[DELAY], args[FORCE]) == ('{"n": 9}', 42.0, False)


@pytest.mark.parametrize(
    ("outcome", "failures_to_dead", "dead"),
    [
        (s.Failed("boom"), False, False),
        (s.Failed("boom"), True, True),  # failures_to_dead: the first failure is the last
        (s.Failed("boom", "retry_on: KeyError is not one of (OSError)"), False, True),
        (s.TimedOut("slow"), True, False),  # a timeout is not a failure of the code
    ],
)
async def test_a_failure_is_dead_at_once_only_when_it_must_be(
    kinds: list[str], outcome: s.Settlement, failures_to_dead: bool, dead: bool
) -> None:
    task = noop_task("sm_fail")
    completer, inflight = _completer(task, failures_to_dead=failures_to_dead)
    _queued(completer, inflight, run_of(task, outcome=outcome))
    conn = _answering()
    await completer.settle(conn)
    [args] = conn.named("job_fail_if_owned")
    assert args[FORCE] is dead


async def test_the_delay_grows_with_the_failures_so_far(kinds: list[str]) -> None:
    backoff = Backoff.exponential(2.0, 3.0, 100.0, jitter=False)
    task = noop_task("sm_grow", backoff=backoff)
    completer, inflight = _completer(task)
    runs = [run_of(task, i, failures=i - 1, outcome=s.Failed("x")) for i in range(1, 6)]
    _queued(completer, inflight, *runs)
    conn = _answering()
    await completer.settle(conn)
    assert [a[DELAY] for a in conn.named("job_fail_if_owned")] == [2, 6, 18, 54, 100]


async def test_a_cancel_request_wins_over_an_ending_short_of_completion(
    kinds: list[str],
) -> None:
    task = noop_task("sm_cancel")
    completer, inflight = _completer(task)
    asked = [
        run_of(task, 1, outcome=s.Failed("boom"), cancel_requested=True),
        run_of(task, 2, outcome=s.Released("stopping"), cancel_requested=True),
        run_of(task, 3, outcome=s.Completed(), cancel_requested=True),
    ]
    _queued(completer, inflight, *asked)
    conn = _answering()
    await completer.settle(conn)
    assert [(name, args[1]) for name, args in conn.calls] == [
        ("job_complete_many_if_owned", [3]),  # it completed: the completion stands
        ("job_cancel_if_owned", 1),
        ("job_cancel_if_owned", 2),
    ]
    assert completer.stats["cancelled"] == 2


async def test_a_lost_claim_is_counted_and_its_slot_given_back(kinds: list[str]) -> None:
    task = noop_task("sm_lost")
    completer, inflight = _completer(task)
    _queued(
        completer,
        inflight,
        run_of(task, 1, outcome=s.Completed()),
        run_of(task, 2, outcome=s.Dead("no")),
    )
    conn = FakeConn()  # no statement finds the claim
    await completer.settle(conn)
    assert completer.stats["ownership_lost"] == 2 and completer.stats["dead"] == 0
    assert completer.unsettled == [] and +inflight.per_kind == Counter()


async def test_completions_wait_for_the_claim_unless_asked(kinds: list[str]) -> None:
    task = noop_task("sm_wait")
    completer, inflight = _completer(task)
    _queued(completer, inflight, run_of(task, 1, outcome=s.Completed()))
    conn = _answering()
    await completer.settle(conn, completes=False)
    assert conn.calls == [] and len(completer.completes()) == 1
    # A completion in the handler's own transaction is settled as it is taken.
    _queued(completer, inflight, run_of(task, 2, outcome=s.COMMITTED))
    assert [r.id for r in completer.unsettled] == [1]
    assert completer.stats["completed"] == 1


def test_child_failed_names_the_childs_whole_exception_on_one_line() -> None:
    # A child's exception of several lines (pydantic's, asyncpg's) left ChildFailed its
    # last line alone, without the exception's type; a reason that is no traceback
    # (venturi.dead's) is kept whole. One line either way: the parent's failure line and
    # error type come from its traceback's last line (error_of).
    def failed(exc: BaseException) -> str:
        try:
            raise exc
        except BaseException:
            return traceback.format_exc()

    many = ValueError("1 validation error for Order\nquantity\n  Input should be greater than 0")
    said = str(ChildFailed(7, "dead", failed(many)))
    assert said == (
        "child job 7 ended dead: ValueError: 1 validation error for Order quantity "
        "Input should be greater than 0"
    )
    assert str(ChildFailed(8, "dead", failed(RuntimeError("card declined")))) == (
        "child job 8 ended dead: RuntimeError: card declined"
    )
    assert str(ChildFailed(9, "dead", "out of stock\nsee the ledger")) == (
        "child job 9 ended dead: out of stock see the ledger"
    )
    assert str(ChildFailed(10, "deleted", None)) == "child job 10 ended deleted: no reason given"
    assert error_of(failed(ChildFailed(7, "dead", failed(many))))[0].endswith("ChildFailed")


def test_a_failure_reads_as_the_exception_its_traceback_ends_with() -> None:
    # One reading for the failure line, the jobs lists and ChildFailed: the exception's
    # type and its whole message, whatever frames, chains or groups come before it.
    def failed(exc: BaseException, cause: BaseException | None = None) -> str:
        try:
            try:
                if cause is not None:
                    raise cause
            except BaseException:
                raise exc  # noqa: B904 (chained implicitly, "During handling of ...")
            raise exc
        except BaseException:
            return traceback.format_exc()

    assert error_of(failed(KeyError("sku-9"))) == ("KeyError", "'sku-9'")
    assert error_of(failed(KeyboardInterrupt())) == ("KeyboardInterrupt", "")
    chained = failed(RuntimeError("retry later\n  upstream 503"), ValueError("first"))
    assert "During handling" in chained
    assert error_of(chained) == ("RuntimeError", "retry later upstream 503")
    group = failed(ExceptionGroup("2 imports failed", [ValueError("a"), TypeError("b")]))
    assert error_of(group) == ("ExceptionGroup", "2 imports failed (2 sub-exceptions)")
    assert error_of("card 9 is stolen\nsee the ledger") == (
        "Error",
        "card 9 is stolen see the ledger",
    )
    assert error_of("") == ("Error", "")
    assert exception_line(failed(OSError("disk\nfull"))) == "OSError: disk full"


def test_a_chained_failure_reads_as_the_exception_raised_last() -> None:
    # The reading took an exception group's block when the traceback began with one (the
    # cause, when a handler raised from it), and a group raised while handling another
    # exception gave the first one's type and the group's traceback as its message.
    class FetchFailed(Exception):
        pass

    def text_of(raiser: Any) -> str:
        try:
            raiser()
        except BaseException:
            return traceback.format_exc()
        raise AssertionError("did not raise")

    def from_group() -> None:
        try:
            raise ExceptionGroup("unhandled errors", [ConnectionError("refused")])
        except* ConnectionError as eg:
            raise FetchFailed("fetch of 7 failed") from eg

    def group_while_handling() -> None:
        try:
            raise ValueError("row 7 bad")
        except ValueError:
            raise ExceptionGroup("2 rows failed", [KeyError("a"), TypeError("b")])  # noqa: B904

    def frame_like_message() -> None:
        raise ValueError('bad config:\n  File "settings.py" is missing')

    def local_class() -> None:
        class Boom(Exception):
            pass

        raise Boom("local")

    assert error_of(text_of(from_group)) == (
        f"{FetchFailed.__module__}.{FetchFailed.__qualname__}",
        "fetch of 7 failed",
    )
    assert error_of(text_of(group_while_handling)) == (
        "ExceptionGroup",
        "2 rows failed (2 sub-exceptions)",
    )
    assert error_of(text_of(frame_like_message)) == (
        "ValueError",
        'bad config: File "settings.py" is missing',
    )
    kind, message = error_of(text_of(local_class))
    assert kind.endswith("local_class.<locals>.Boom") and message == "local", (kind, message)


def test_a_message_quoting_a_chains_separator_is_read_whole() -> None:
    # A message that quotes Python's line between chained exceptions (a log pasted into
    # it, a wrapped subprocess's stderr) was cut there: the reading took the quoted line
    # for the chain's last separator and gave the text after it, or no exception at all.
    quoted = (
        "upstream said:\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "disk full"
    )

    def quoting() -> None:
        raise RuntimeError(quoted)

    def chained_then_quoting() -> None:
        try:
            raise ValueError("first")
        except ValueError:
            raise RuntimeError(quoted)  # noqa: B904 (chained implicitly)

    for raiser in (quoting, chained_then_quoting):
        try:
            raiser()
        except RuntimeError:
            text = traceback.format_exc()
        assert error_of(text) == (
            "RuntimeError",
            "upstream said: During handling of the above exception, another exception"
            " occurred: disk full",
        ), raiser.__name__


async def test_completions_and_renewals_lock_their_jobs_in_id_order(kinds: list[str]) -> None:
    # An operator's bulk cancel locks its jobs in id order; the worker's completions (by
    # themselves or riding a claim) locked them in the order the handlers ended, and its
    # lease renewals in the order they started: the two could each hold a row the other
    # waited for, and the operator got "deadlock detected" (the lock-race probe). In id
    # order both ways, the second to reach a row waits for the first and no cycle forms.
    task = noop_task("sm_order", renew_lease=True)
    completer, inflight = _completer(task)
    runs = [run_of(task, i, outcome=s.Completed()) for i in (9, 3, 7)]
    _queued(completer, inflight, *runs)
    assert [r.id for r in completer.completes()] == [3, 7, 9]  # what rides the next claim
    conn = _answering()
    await completer.settle(conn)
    assert [list(args[1]) for args in conn.named("job_complete_many_if_owned")] == [[3, 7, 9]]

    beats = FakeConn(
        sql.DEFAULT_SCHEMA,
        job_heartbeat_if_owned=lambda args: [
            {"id": i, "attempt": 1, "renewed": True, "owned": True, "cancel_requested": False}
            for i in args[1]
        ],
    )
    running: dict[Any, Run] = {i: run_of(task, i, renew=True, lease=0.0) for i in (9, 3, 7)}
    heart = Heartbeat(sql.DEFAULT_SCHEMA, Claimant("w"), 1.0, Instruments(False), running, None)  # type: ignore[arg-type]
    await heart.beat(beats)
    assert [list(args[1]) for args in beats.named("job_heartbeat_if_owned")] == [[3, 7, 9]]
