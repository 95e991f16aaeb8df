"""The chaos soak's grouped-runs check (tests/chaos/groupcheck.py) proven on made-up
ledgers: a right one passes with its figures, and each wrong one (an overshoot, a claim
under a lowered cap past it, a recovery before the lease ended, a slot held too long
after its worker died, an entry with no end) is caught; a zombie's tail is counted
apart."""

from __future__ import annotations

from typing import Any

from tests.chaos import groupcheck, history, records
from tests.chaos.groupcheck import CapChange, Record
from tests.chaos.records import Claim, Event, Faults

CAPS = {"chaos_group1": 1, "chaos_group3": 3}
LEASES = {"chaos_group1": 4.0, "chaos_group3": 4.0}
G1, G3 = ("chaos_group1", "t0"), ("chaos_group3", "t0")


def run(
    job: int,
    group: tuple[str, str],
    claimed: float,
    start: float,
    end: float | None,
    pid: int = 100,
    attempt: int = 1,
) -> list[Record]:
    """A run's entry (and exit, unless ``end`` is None) records."""
    kind, grp = group
    token = f"token-{pid}"
    out = [Record(job, attempt, "S", pid, kind, grp, start, token, claimed, claimed + 4.0)]
    if end is not None:
        out.append(Record(job, attempt, "E", pid, kind, grp, end))
    return out  # fmt: skip


def claim(
    job: int, at: float, end: str, end_at: float, pid: int = 100, attempt: int = 1
) -> dict[int, Claim]:
    c = Claim(attempt, f"h:{pid}", at)
    c.end = Event(job, end_at, end, attempt, f"h:{pid}", None)
    return {attempt: c}  # fmt: skip


def clean() -> dict[str, Any]:
    """One group of each kind: cap 1 runs one after the other, cap 3 three at once."""
    records = [
        *run(1, G1, 0.0, 0.1, 1.0),
        *run(2, G1, 1.1, 1.2, 2.0),
        *run(3, G3, 0.0, 0.1, 2.0),
        *run(4, G3, 0.0, 0.2, 2.0),
        *run(5, G3, 0.0, 0.3, 2.0),
        *run(6, G3, 2.1, 2.2, 3.0),
    ]
    claims = {
        1: claim(1, 0.0, "completed", 1.05),
        2: claim(2, 1.1, "completed", 2.05),
        3: claim(3, 0.0, "completed", 2.05),
        4: claim(4, 0.0, "completed", 2.05),
        5: claim(5, 0.0, "completed", 2.05),
        6: claim(6, 2.1, "completed", 3.05),
    }
    groups = {1: G1, 2: G1, 3: G3, 4: G3, 5: G3, 6: G3}
    return {"records": records, "lines": [], "claims": claims, "groups": groups,
            "faults": Faults(), "deaths": {}, "changes": []}  # fmt: skip


def check(h: dict[str, Any]) -> groupcheck.Report:
    return groupcheck.check(
        h["records"], h["lines"], h["claims"], h["groups"], h["faults"], h["deaths"],
        windows=[], caps=CAPS, changes=h["changes"], leases=LEASES, recover_every=1.0,
    )  # fmt: skip


def test_a_right_ledger_passes_and_is_counted() -> None:
    rep = check(clean())
    assert rep.violations == []
    assert rep.intervals == 6 and rep.ended_by == {"exit": 6}
    assert rep.peaks == {G1: (1, 1), G3: (3, 3)}
    assert rep.overshoots == rep.zombies == 0 and rep.tokens == 1


def test_two_runs_at_once_in_a_group_capped_at_one_are_an_overshoot() -> None:
    h = clean()
    h["records"] += run(7, G1, 0.5, 0.6, 0.9, pid=200)
    h["claims"][7] = claim(7, 0.5, "completed", 0.95, pid=200)
    h["groups"][7] = G1
    rep = check(h)
    assert rep.overshoots == 1
    assert "chaos_group1/t0: 2 runs at" in rep.violations[0]
    assert "job 7 attempt 1 pid 200" in rep.violations[0]  # the ledger rows, named


def test_a_claim_past_a_lowered_cap_is_an_overshoot_and_running_jobs_may_finish() -> None:
    h = clean()
    # Lowered to 1 at 1.0, while jobs 3, 4 and 5 run: they may finish (no violation) ...
    h["changes"] = [CapChange("chaos_group3", "t0", 1.0, 1)]
    assert check(h).violations == []
    # ... but a claim made after it while they still run is over the new cap.
    h["records"] += run(8, G3, 1.5, 1.6, 1.8, pid=200)
    h["claims"][8] = claim(8, 1.5, "completed", 1.85, pid=200)
    h["groups"][8] = G3
    rep = check(h)
    assert rep.overshoots == 1 and "over its cap 1" in rep.violations[0]
    assert rep.lowered_peaks[G3] == (4, 1)


def test_a_zombie_s_tail_is_counted_apart() -> None:
    h = clean()
    # Job 1 runs past its lease (ends 4.0): recovered at 4.5, its run writes its exit at
    # 5.0; job 9 is claimed at 4.6 in the same group (job 2 is not there).
    h["records"] = [r for r in h["records"] if r.job not in (1, 2)] + run(1, G1, 0.0, 0.1, 5.0)
    del h["claims"][2], h["groups"][2]
    h["claims"][1] = claim(1, 0.0, "stale-recovered", 4.5)
    h["records"] += run(9, G1, 4.6, 4.7, 5.5, pid=200)
    h["claims"][9] = claim(9, 4.6, "completed", 5.55, pid=200)
    h["groups"][9] = G1
    rep = check(h)
    assert rep.violations == []
    assert rep.zombies == 1 and rep.zombie_over_cap == 1
    assert abs(rep.zombie_tails[0] - 0.5) < 1e-9


def test_a_recovery_before_the_lease_ended_is_caught() -> None:
    h = clean()
    h["records"] = [r for r in h["records"] if r.job != 1] + run(1, G1, 0.0, 0.1, 5.0)
    h["claims"][1] = claim(1, 0.0, "stale-recovered", 3.0)  # the lease ends at 4.0
    rep = check(h)
    assert any("before its lease ended" in v for v in rep.violations)


def test_a_slot_held_past_lease_and_recovery_after_its_worker_died_is_caught() -> None:
    h = clean()
    # pid 300 is SIGKILLed at 10.0 in job 10's run; its claim is recovered at 14.5: fine.
    h["records"] += run(10, G1, 9.0, 9.1, None, pid=300)
    h["claims"][10] = claim(10, 9.0, "stale-recovered", 14.5, pid=300)
    h["groups"][10] = G1
    h["faults"] = Faults(kills={300: 10.0})
    h["deaths"] = {300: 10.0}
    rep = check(h)
    assert rep.violations == [] and rep.slot_frees == [4.5]
    assert rep.ended_by["death"] == 1
    # Recovered 11 s after the kill: past 4 s of lease + 1 s of recovery + the slack.
    h["claims"][10] = claim(10, 9.0, "stale-recovered", 21.0, pid=300)
    rep = check(h)
    assert any("slot was freed 11.00 s after its worker died" in v for v in rep.violations)


def test_a_cancelled_run_ends_at_its_q_line_and_an_endless_one_is_caught() -> None:
    h = clean()
    h["records"] += run(11, G1, 5.0, 5.1, None, pid=200)
    h["claims"][11] = claim(11, 5.0, "released", 6.0, pid=200)
    h["groups"][11] = G1
    h["lines"] = ["Q 11 1 200 cancel 5.900000"]
    rep = check(h)
    assert rep.violations == [] and rep.ended_by["cancel"] == 1
    h["lines"], h["claims"][11] = [], {}
    rep = check(h)
    assert any("an entry with no end" in v for v in rep.violations)


def test_history_claims_feed_the_check() -> None:
    """The claims the check reads are ``records.claims_of``'s (the journal merged)."""
    job = records.Job(1, "chaos_group1", "completed", {"seq": 1}, 2, 1, 20, "h:100", 5.0,
                      5.5, None, None)  # fmt: skip
    events = [Event(1, 0.0, "claimed", 1, "h:200", None),
              Event(1, 4.5, "stale-recovered", 1, "h:100", None)]  # fmt: skip
    claims = records.claims_of(job, events)
    assert claims[1].end is not None and claims[1].end.event == "stale-recovered"
    assert claims[2].end is not None and claims[2].end.event == "completed"


def test_a_stuck_grouped_job_is_named_with_its_group() -> None:
    """A violation names the job's group: the last CI failure's stuck grouped jobs could
    only be told apart by their kind."""
    job = records.Job(7, "chaos_group1", "pending", {"seq": 7}, 0, 0, 20, None, None, None,
                      None, None, grp="t0")  # fmt: skip
    rep = history.check([job], [], [], Faults(), enqueued={7: 7}, ambiguous_seqs=set(),
                        expected={}, leases={}, caps={})  # fmt: skip
    assert rep.stuck == 1
    assert any("job 7 (chaos_group1, group t0): stuck pending" in v for v in rep.violations)
