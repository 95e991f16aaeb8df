"""The worker's configuration, checked once, and the policy it resolves per kind; the
journal's vocabulary against the table that stores it. No database."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import venturi
from tests.support.carries import noop_task
from venturi import Backoff, ConfigError, Rate
from venturi.db.journal import JournalEvent
from venturi.runtime.config import Registration, WorkerConfig, policies
from venturi.runtime.worker import Worker

DSN = "postgresql://nowhere.invalid/none"


def test_each_kind_policy_takes_the_override_then_the_task_then_the_worker(
    kinds: list[str],
) -> None:
    own = Backoff.fixed(3)
    plain = noop_task("cfg_plain")
    declared = noop_task(
        "cfg_declared", lease=5, cap=2, renew_lease=True, backoff=own, global_cap=7
    )
    config = WorkerConfig.build(DSN, lease=60, backoff=Backoff.fixed(9))
    rate = Rate(per_second=2)
    regs = [
        Registration.check(plain, None, None, None, None),
        Registration.check(declared, 1, rate, False, 4),
    ]
    got = policies(regs, config)
    assert (got["cfg_plain"].lease, got["cfg_plain"].renew, got["cfg_plain"].cap) == (
        60,
        False,
        None,
    )
    assert got["cfg_plain"].backoff == Backoff.fixed(9)
    d = got["cfg_declared"]
    assert (d.lease, d.renew, d.cap, d.global_cap, d.rate, d.backoff) == (5, False, 1, 4, rate, own)


def test_the_deadline_is_half_the_lease_between_one_and_thirty_seconds() -> None:
    assert WorkerConfig.build(DSN, lease=900).statement_deadline() == 30.0
    assert WorkerConfig.build(DSN, lease=10).statement_deadline() == 5.0
    assert WorkerConfig.build(DSN, lease=1).statement_deadline() == 1.0
    assert WorkerConfig.build(DSN, statement_timeout=2).statement_deadline() == 2.0


def test_the_worker_reads_and_writes_its_knobs_through_its_config(kinds: list[str]) -> None:
    worker = Worker(None, DSN, [noop_task("cfg_knobs")], concurrency=3, claimed_by="a")
    assert (worker.concurrency, worker.claimed_by) == (3, "a")
    worker.claimed_by = "a/2"  # WorkerGroup numbers the identities it runs
    assert worker.config.claimed_by == "a/2"
    assert worker.kinds == ["cfg_knobs"] and not worker.listening and worker.jobs_held() == 0


def test_the_first_bad_knob_is_the_one_reported() -> None:
    with pytest.raises(ConfigError, match=r"^concurrency "):
        WorkerConfig.build(DSN, concurrency=0, poll_max=-1)
    with pytest.raises(ConfigError, match=r"^poll_max "):
        WorkerConfig.build(DSN, poll_max=-1, lease=-1)


def test_the_journal_vocabulary_is_what_the_table_allows() -> None:
    tables = (Path(venturi.__file__).parent / "sql_templates/schema/tables.sql.j2").read_text()
    check = re.search(r"event\s+text\s+NOT NULL CHECK \(event IN \((.*?)\)\)", tables, re.S)
    assert check is not None
    allowed = set(re.findall(r"'([a-z-]+)'", check.group(1)))
    assert allowed == {str(e) for e in JournalEvent}


def test_concurrency_is_at_most_ten_thousand() -> None:
    # Each slot is paid for when the worker starts (a pool holder, a thread, a claim's
    # batch): 100,000,000 took 24 GB before the OOM killer ended the worker.
    assert WorkerConfig.build(DSN, concurrency=10_000).concurrency == 10_000
    with pytest.raises(ConfigError, match=r"^concurrency must be at most 10,000 .*, got 10,001$"):
        WorkerConfig.build(DSN, concurrency=10_001)
    with pytest.raises(ConfigError, match=r"^concurrency must be at most 10,000 "):
        Worker(None, DSN, [], concurrency=100_000_000)
