"""The chaos soak: its history check proven on made-up histories (it must catch each kind
of wrong history, or a green soak means nothing), the short soak itself, and the library
bugs it found, each pinned by a deterministic test."""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import venturi
from tests.chaos import config, harness, history, records, soakcheck
from tests.chaos.records import Event, Faults, Job, Run
from tests.support import running, wait_status, workertasks
from venturi import Worker, testing

EXPECTED = {"q": "completed", "p": "completed", "d": "dead", "c": "completed"}
LEASES = {"q": 4.0, "p": 4.0, "d": 4.0, "c": 4.0}


def job(id: int, kind: str, status: str, attempt: int, **kw: Any) -> Job:
    fields: dict[str, Any] = {
        "carry": {"seq": id, "trail": [], "ms": 0},
        "failures": 0,
        "max_failures": 25,
        "claimed_by": None,
        "claimed_at": None,
        "finished_at": None,
        "result": None,
        "last_error": None,
    }
    fields.update(kw)
    return Job(id=id, kind=kind, status=status, attempt=attempt, **fields)


def clean() -> dict[str, Any]:
    """A history that is right: four jobs, one SIGKILL."""
    jobs = [
        # Completed at its first claim.
        job(1, "q", "completed", 1, claimed_by="h:100", claimed_at=10.0, finished_at=10.1,
            result={"a": 1, "p": 100}),
        # Paused once by design, completed at its second claim.
        job(2, "p", "completed", 2, claimed_by="h:100", claimed_at=11.0, finished_at=11.1,
            result={"a": 2, "p": 100}, carry={"seq": 2, "trail": ["1:200:step"], "ms": 0}),
        # Its first worker was SIGKILLed; recovered, run again, completed.
        job(3, "q", "completed", 2, failures=1, claimed_by="h:100", claimed_at=20.0,
            finished_at=20.1, result={"a": 2, "p": 100}),
        # Raised three times: dead at its backstop.
        job(4, "d", "dead", 3, failures=3, max_failures=3, claimed_by="h:100",
            claimed_at=13.0, finished_at=13.1, last_error="ValueError: attempt=3 pid=100"),
    ]  # fmt: skip
    events = [
        Event(2, 10.5, "claimed", 1, "h:200", None),
        Event(2, 10.6, "paused", 1, "h:200", "visible again at ..."),
        Event(3, 12.0, "claimed", 1, "h:200", None),
        Event(3, 16.5, "stale-recovered", 1, "h:100", "lease expired; h:200 presumed dead"),
        Event(4, 11.0, "claimed", 1, "h:100", None),
        Event(4, 11.1, "failed", 1, "h:100", "ValueError: doomed attempt=1 pid=100"),
        Event(4, 12.0, "claimed", 2, "h:200", None),
        Event(4, 12.1, "failed", 2, "h:200", "ValueError: doomed attempt=2 pid=200"),
        Event(4, 13.0, "claimed", 3, "h:100", None),
        Event(4, 13.1, "failed", 3, "h:100", "ValueError: doomed attempt=3 pid=100"),
        Event(4, 13.1, "dead", 3, "h:100", "failure backstop reached (3 of 3)"),
    ]
    runs = [
        Run(1, 1, 100, "q", 10.0, 10.05, "complete"),
        Run(2, 1, 200, "p", 10.5, 10.55, "pause"),
        Run(2, 2, 100, "p", 11.0, 11.05, "complete"),
        Run(3, 1, 200, "q", 12.0, None, None),  # killed mid-run
        Run(3, 2, 100, "q", 20.0, 20.05, "complete"),
        Run(4, 1, 100, "d", 11.0, 11.05, "raise"),
        Run(4, 2, 200, "d", 12.0, 12.05, "raise"),
        Run(4, 3, 100, "d", 13.0, 13.05, "raise"),
    ]
    return {
        "jobs": jobs,
        "events": events,
        "runs": runs,
        "faults": Faults(kills={200: 12.5}),
        "enqueued": {1: 1, 2: 2, 3: 3, 4: 4},
        "ambiguous": set(),
    }


def check(h: dict[str, Any], caps: dict[str, int] | None = None) -> records.Report:
    return history.check(
        h["jobs"],
        h["events"],
        h["runs"],
        h["faults"],
        enqueued=h["enqueued"],
        ambiguous_seqs=h["ambiguous"],
        expected=EXPECTED,
        leases=LEASES,
        caps=caps or {},
    )


def test_a_right_history_passes_and_is_counted() -> None:
    rep = check(clean())
    assert rep.violations == []
    assert (rep.jobs, rep.lost, rep.stuck, rep.runs, rep.claims) == (4, 0, 0, 8, 8)
    assert rep.statuses == {"completed": 3, "dead": 1}
    assert rep.reruns == {"SIGKILL": 1}
    assert rep.multi_run_jobs == 3


def _violations(mutate: Any) -> list[str]:
    h = copy.deepcopy(clean())
    mutate(h)
    return check(h).violations


def _by_id(h: dict[str, Any], job_id: int) -> Job:
    job: Job = next(j for j in h["jobs"] if j.id == job_id)
    return job


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        # A job an enqueue returned is gone.
        (lambda h: h["enqueued"].update({5: 5}), "gone from the table"),
        # A job no enqueue returned (and no ambiguous batch explains).
        (lambda h: h["enqueued"].pop(4), "no enqueue returned it"),
        # Stuck claimed at the end.
        (lambda h: setattr(_by_id(h, 1), "status", "claimed"), "stuck claimed"),
        # Finished, but not as its handler dictates.
        (lambda h: setattr(_by_id(h, 4), "status", "completed"), "its handler dictates dead"),
        # A run nobody claimed.
        (lambda h: h["runs"].append(Run(1, 2, 100, "q", 30.0, 30.1, "complete")),
         "which was never claimed"),
        # A run by a process that did not hold the claim.
        (lambda h: setattr(h["runs"][0], "pid", 300), "claimed by h:100"),
        # Two runs under one claim: at-least-once without a journaled reason.
        (lambda h: h["runs"].append(Run(1, 1, 100, "q", 10.0, 10.05, "complete")),
         "ran twice under one claim"),
        # A settle applied by a worker that no longer owned the claim.
        (lambda h: setattr(h["events"][3], "event", "paused"), "settled paused by h:100"),
        # The stored result came from a stale claim.
        (lambda h: setattr(_by_id(h, 3), "result", {"a": 1, "p": 200}), "not from its last"),
        # The carry holds a checkpoint its owner never wrote.
        (lambda h: _by_id(h, 2).carry["trail"].append("9:1:step"), "carry trail"),
        # A settle that disagrees with what the handler returned.
        (lambda h: setattr(h["runs"][1], "outcome", "complete"), "its handler ended 'complete'"),
        # A failure detail from another claim.
        (lambda h: setattr(h["events"][7], "detail", "ValueError: attempt=1 pid=100"),
         "does not name attempt=2 pid=200"),
        # The failure counter and the journal disagree.
        (lambda h: setattr(_by_id(h, 3), "failures", 0), "journal shows 1"),
        # A claim missing from the journal.
        (lambda h: h["events"].pop(0) and h["events"].pop(0), "do not cover attempts"),
        # A claim ended twice.
        (lambda h: h["events"].append(Event(4, 11.2, "retried", 1, "h:100", "x")),
         "ended twice"),
        # A claim settled without anyone running it.
        (lambda h: h["runs"].pop(0), "no handler ran it"),
        # A release by a worker nobody asked to stop.
        (lambda h: setattr(h["events"][3], "event", "released"), "never sent SIGTERM"),
    ],
)  # fmt: skip
def test_each_wrong_history_is_caught(mutate: Any, expected: str) -> None:
    found = _violations(mutate)
    assert any(expected in v for v in found), found


def test_re_runs_are_explained_by_what_happened() -> None:
    h = clean()
    # Not killed (its handler finished, the settle never came): the same recovery is a
    # stall, a connection fault, or an overrun.
    h["runs"][3].end, h["runs"][3].outcome = 12.05, "complete"
    h["faults"] = Faults()
    assert check(h).reruns == {"lease expired under a live worker (stall)": 1}
    h["faults"] = Faults(connection=[(14.0, 15.0)])
    assert check(h).reruns == {"connection loss (terminate / restart)": 1}
    h["faults"] = Faults()
    h["runs"][3].end, h["runs"][3].outcome = 16.4, "complete"  # outlived its 4 s lease
    rep = check(h)
    assert rep.reruns == {"handler outlived its lease (no renewal)": 1}
    assert rep.late_settles == 1


def test_caps_are_checked_per_process() -> None:
    runs = [Run(i, 1, 100, "c", 1.0 + i * 0.01, 2.0, "complete") for i in range(3)]
    runs.append(Run(9, 1, 200, "c", 1.0, 2.0, "complete"))
    jobs = [
        job(r.job, "c", "completed", 1, claimed_by=f"h:{r.pid}", claimed_at=1.0,
            finished_at=2.0, result={"a": 1, "p": r.pid})
        for r in runs
    ]  # fmt: skip
    h = {"jobs": jobs, "events": [], "runs": runs, "faults": Faults(),
         "enqueued": {j.id: j.id for j in jobs}, "ambiguous": set()}  # fmt: skip
    assert check(h, caps={"c": 3}).violations == []
    assert check(h, caps={"c": 2}).violations == ["pid 100: 3 runs of c at once, over its cap 2"]


# asyncpg's pool warning with an exception that has a cause: two tracebacks, one record.
POOL_WARNING = """\
2026-12-01 10:00:00,000 WARNING asyncpg.pool: Failed to restore the pool connection floor; retrying
Traceback (most recent call last):
  File "x.py", line 1, in read
ConnectionResetError: [Errno 104] Connection reset by peer

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "pool.py", line 2, in _maintain_min_size
asyncpg.exceptions.ConnectionDoesNotExistError: connection was closed in the middle of operation
"""
NEVER_RETRIEVED = """\
2026-12-01 10:00:01,000 ERROR asyncio: Task exception was never retrieved
Traceback (most recent call last):
  File "y.py", line 3, in write
asyncpg.exceptions.InterfaceError: cannot call Connection.fetch(): connection has been released
"""
QUIET = "2026-12-01 10:00:02,000 INFO venturi.worker: job 1 (k) completed\n"


def test_a_worker_log_s_tracebacks_are_told_from_the_pool_s_reconnect_warnings() -> None:
    # A pool warning whose exception has a cause holds two tracebacks: still one warning,
    # noise, and its exception is not the log's last error.
    carrying, noise = soakcheck._tracebacks(QUIET + POOL_WARNING + QUIET)
    assert (carrying, noise) == ([], 1)
    assert soakcheck._last_exception(QUIET + POOL_WARNING) == ""
    # Anything else with a traceback is found, with the record that logged it.
    carrying, noise = soakcheck._tracebacks(POOL_WARNING + NEVER_RETRIEVED + QUIET)
    assert noise == 1 and len(carrying) == 1
    assert carrying[0].splitlines()[0].endswith("ERROR asyncio: Task exception was never retrieved")
    assert soakcheck._last_exception(carrying[0]).startswith("asyncpg.exceptions.InterfaceError")
    assert soakcheck._last_exception(NEVER_RETRIEVED + POOL_WARNING).startswith(
        "asyncpg.exceptions.InterfaceError"
    )


def test_run_records_survive_a_torn_line() -> None:
    runs = records.parse_runs(
        ["S 1 1 100 q 1.5", "E 1 1 100 complete 1.6", "S 2 1 100 q 1.7", "E 2 1 1"]
    )
    assert [(r.job, r.end, r.outcome) for r in runs] == [(1, 1.6, "complete"), (2, None, None)]


# --- the short soak -------------------------------------------------------------------


@pytest.fixture(scope="module")
def has_cluster() -> None:
    if testing.find_bindir() is None:
        pytest.skip("no PostgreSQL binaries to start the soak's own cluster")


@pytest.mark.soak
async def test_short_chaos_soak(has_cluster: None, tmp_path: Path) -> None:
    """`python -m tests.chaos.harness --short`: about a minute of load under SIGKILL,
    SIGTERM, terminated backends and a PostgreSQL restart; the history must be clean."""
    seed = int(os.environ.get("VENTURI_CHAOS_SEED", config.SHORT.seed))
    cfg = dataclasses.replace(config.SHORT, seed=seed)
    result = await harness.soak(cfg, tmp_path, echo=lambda line: None)
    print(result.summary)  # shown with -s, or on failure
    rep, c = result.report, result.counters
    assert rep.violations == [], result.summary
    assert rep.lost == 0 and rep.stuck == 0
    assert rep.jobs >= 2000
    assert c["SIGKILL"] == cfg.kills and c["PostgreSQL restarts"] == 1
    assert c["SIGTERM"] >= 1 and c["pg_terminate_backend"] == cfg.terminates
    assert rep.reruns["SIGKILL"] >= 1
    # The cost of no lease renewal: overrunning handlers were recovered and run twice.
    assert rep.overrun_jobs >= 1 and rep.overrun_twice == rep.overrun_jobs
    # Workflows ran beside the plain jobs, under the same faults, and every check held.
    w = result.flows
    assert (w.steps_run_again, w.tx_writes_wrong) == (0, 0), result.summary
    assert (w.children_twice, w.children_unrecorded) == (0, 0), result.summary
    assert (w.signals_lost, w.stuck) == (0, 0), result.summary
    assert w.steps_recorded > 0 and w.tx_writes > 0 and w.timers > 0
    assert w.children_gathered > 0 and w.signals_delivered > 0
    assert w.workflows_completed > 0 and w.flows_completed == w.flows
    # Grouped jobs ran beside them: no group ever over its cap (zombies apart), caps
    # reached, the lowered caps in force.
    g = result.groups
    assert g.overshoots == 0 and g.intervals > 0, result.summary
    assert any(peak == cap for peak, cap in g.peaks.values()), result.summary
    assert len(g.lowered_peaks) == 2, result.summary


# --- library bugs the soak found --------------------------------------------------------


class InternalErrorOnce:
    """A real pool whose next statement fails the way asyncpg fails when it releases a
    connection whose backend was just terminated (MagicStack/asyncpg#784): with
    InternalClientError, which is not an InterfaceError nor a PostgresError."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.armed = False
        self.raised = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def _trip(self) -> None:
        if self.armed:
            self.armed = False
            self.raised += 1
            raise asyncpg.InternalClientError(
                "cannot switch to state 15; another operation (2) is in progress"
            )

    async def fetch(self, *args: Any, **kw: Any) -> Any:
        self._trip()
        return await self._pool.fetch(*args, **kw)

    async def fetchrow(self, *args: Any, **kw: Any) -> Any:
        self._trip()
        return await self._pool.fetchrow(*args, **kw)

    async def fetchval(self, *args: Any, **kw: Any) -> Any:
        self._trip()
        return await self._pool.fetchval(*args, **kw)


async def test_worker_survives_internal_client_error(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    @venturi.task(kind="chaos_ice")
    async def handler(ctx: venturi.Context[Any], carry: workertasks.Item) -> None:
        return None

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        flaky = InternalErrorOnce(pool)
        first = await handler.enqueue(conn, workertasks.Item(1))
        worker = Worker(None, flaky, [handler], poll_max=0.1)
        async with running(worker):
            await wait_status(conn, first, "completed")
            flaky.armed = True
            second = await handler.enqueue(conn, workertasks.Item(2))
            # Before the fix the worker's loop died here, and `running` re-raised its error.
            await wait_status(conn, second, "completed", within=5)
        assert flaky.raised == 1
    finally:
        await pool.close()
