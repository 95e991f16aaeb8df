"""The network and server scenarios' check and figures, on top of the soak's (a mixin of
``scenarios.Scenario``): ``dropped_outcomes`` finds the outcomes a worker dropped while
its claim was still owned (the job then ran again) and sorts out those a fault explains
(docs/chaos.md, "Network and server faults"); ``check_outcomes`` counts them, makes the
rest violations and measures how long completions took to be written and how many
claims were released before any SIGTERM; ``figures`` is the table a scenario prints
above the soak's."""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from venturi import db

from . import history, records
from .config import TASKS, Config
from .fleet import Worker
from .scenariofaults import Hole

# An outcome its handler returned less than this before its worker was cut off (a
# SIGKILL, a black-hole) or the database slowed is written by the loop's next
# iteration, which the fault met:
# its re-run is by design, as for the refused windows, which open as early. (The soak
# with workflows, a loop iteration slower under their statements, saw 0.15 s.)
CUT_OFF_MARGIN = 1.0


class ScenarioCheck:
    """A scenario's checks and figures; see the module's docstring."""

    # Provided by scenarios.Scenario.
    name: str
    proxies: list[Any]
    windows: dict[str, tuple[float, float]]
    holes: list[Hole]
    enqueue_errors: Counter[str]
    rate_before: dict[int, float]
    rate_during: dict[int, float]
    dropped: list[str]
    expired_in_outage: int
    lost_to_partition: int
    short_when_slow: int
    early_releases: int
    settle_lag: str
    # Provided by harness.Harness.
    cfg: Config
    workers: list[Worker]
    faults: records.Faults
    counters: Counter[str]
    runs_dir: Path

    if TYPE_CHECKING:  # provided by harness.Harness too

        def log(self, message: str) -> None: ...

        async def _fetch_all(self, name: str, batch: int) -> list[Any]: ...

        async def journal_events(self) -> list[records.Event]: ...

        def run_lines(self) -> list[str]: ...

    # --- the extra check ---------------------------------------------------------------

    async def check_outcomes(self, report: records.Report) -> None:
        """The checks on top of the soak's (``report``, which gets their violations)."""
        events = await self.journal_events()
        lines = self.run_lines()
        # No outcome can be written while the server is down or refuses writes (a
        # restart, a failover, read-only mode): a lease that ends then, or before the
        # worker's error backoff brings it back, is recovered by design, and the re-run
        # is journaled stale-recovered.
        # The window opens a second early: an outcome returned just before the outage is
        # written by the loop's next iteration, which the outage may already meet.
        refused = [
            (start - 1.0, end + db.errors.ERROR_BACKOFF.cap)
            for what, (start, end) in self.windows.items()
            if what in ("writes refused", "restart", "failover")
        ]
        # A partition longer than the lease costs the partitioned worker the outcomes it
        # held by design (the ownership guard must refuse them).
        partitioned = [
            (self.workers[h.worker - 1].proc.pid, h.at - CUT_OFF_MARGIN, h.healed or float("inf"))
            for h in self.holes
        ]
        # Under the slow database, the leases shorter than the workers' default (the
        # 1 s and 1.5 s kinds) are shorter than a few delayed round trips: they may end
        # before a completion is written, and the job is recovered (journaled). Leases
        # of the default must hold.
        leases = {k: t.lease or self.cfg.lease for k, t in TASKS.items()}
        short = {k for k, lease in leases.items() if lease < self.cfg.lease}
        slowed = [
            (start - CUT_OFF_MARGIN, end + self.cfg.lease)
            for what, (start, end) in self.windows.items()
            if what == "slow"
        ]
        drops = dropped_outcomes(
            events, records.parse_runs(lines), self.faults, leases, refused, partitioned,
            slowed, short, self.faults.connection,
        )  # fmt: skip
        self.dropped, self.expired_in_outage, self.lost_to_partition, self.short_when_slow = drops
        # Any other dropped outcome is a write the worker gave up on.
        for d in self.dropped:
            report.violate(d)
        await self._measure_settle_lag(lines)
        # The soak's check calls every release a SIGTERM drain; these came before one.
        self.early_releases = sum(
            1
            for e in events
            if e.event == "released"
            and e.at < self.faults.terms.get(records.pid_of(e.worker), float("inf"))
        )
        for d in self.dropped[:10]:
            self.log(f"dropped outcome: {d}")

    async def _measure_settle_lag(self, lines: list[str]) -> None:
        """How long a completion took to be written after its handler returned."""
        finished = {
            (r["id"], r["attempt"]): r["finished_at"].timestamp()
            for r in await self._fetch_all("maintenance/history_jobs", 10_000)
            if r["status"] == "completed" and r["finished_at"] is not None
        }
        lags = sorted(
            finished[(r.job, r.attempt)] - r.end
            for r in records.parse_runs(lines)
            if r.outcome == "complete" and r.end is not None and (r.job, r.attempt) in finished
        )
        if lags:
            self.settle_lag = (
                f"p50 {lags[len(lags) // 2]:.2f} s, p99 {lags[int(len(lags) * 0.99)]:.2f} s, "
                f"max {lags[-1]:.2f} s ({len(lags)} completions)"
            )

    # --- the figures -------------------------------------------------------------------

    def _noticed(self, hole: Hole) -> str:
        """How long the worker took to give up on a black-holed connection: the first one
        it closed, or the first new connection it opened, after the black-hole began."""
        # Until the partition healed, or the harness signalled the worker (a connection it
        # closes while exiting, or the kernel's close at a SIGKILL, is not noticing).
        w = self.workers[hole.worker - 1]
        stop = min(hole.healed or time.time(), w.signalled or time.time())
        closed = [x.closed for x in hole.links if x.closed is not None and x.closed_by == "client"]
        opened = [x.opened for x in hole.proxy.links if x.opened > hole.at]
        seen = [t for t in closed + opened if t <= stop]
        if seen:
            return f"{min(seen) - hole.at:.1f} s"
        still = sum(1 for x in hole.links if x.closed is None or x.closed > stop)
        return f"never: {still} of {len(hole.links)} still open after {stop - hole.at:.0f} s"

    def _first_log_after(self, n: int, at: float) -> str:
        w = self.workers[n - 1]
        for line in w.log_path.read_text(errors="replace").splitlines():
            try:
                stamp = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            if stamp >= at and (" WARNING " in line or " ERROR " in line):
                return f"{stamp - at:.1f} s: {line[24:140]}"
        return "nothing logged"

    def _pickup_gap(self) -> str:
        if "failover" not in self.windows:
            return "-"
        fault_at, fault_end = self.windows["failover"]
        starts = []
        for line in self.run_lines():
            parts = line.split()
            if len(parts) == 6 and parts[0] == "S":
                starts.append(float(parts[5]))
        starts.sort()
        before = [t for t in starts if t < fault_at]
        after = [t for t in starts if t >= (fault_end)]
        if not before or not after:
            return "no run on one side of the fault"
        gap = after[0] - before[-1]
        tail = after[0] - (fault_end)
        return f"{gap:.2f} s (last run start before the fault -> first after; {tail:.2f} s after promotion)"

    def figures(self, rep: records.Report) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [("scenario", self.name)]
        faults = {
            k: v
            for k, v in self.counters.items()
            if k in ("failovers", "black-holes", "write refusals", "slow periods")
        }
        rows.append(("faults by kind", ", ".join(f"{k}: {v}" for k, v in faults.items()) or "-"))
        rows.append(
            (
                "enqueue errors (retried) by type",
                ", ".join(f"{k}: {v}" for k, v in sorted(self.enqueue_errors.items())) or "none",
            )
        )
        if self.name in ("failover", "all"):
            rows.append(("pickup gap around the failover", self._pickup_gap()))
        for hole in self.holes:
            rows.append(
                (f"worker #{hole.worker}: noticed its black-holed connections", self._noticed(hole))
            )
            rows.append(
                (
                    f"worker #{hole.worker}: first warning after the black-hole",
                    self._first_log_after(hole.worker, hole.at),
                )
            )
        if "slow" in self.windows:
            start, end = self.windows["slow"]
            span = end - start
            for w in self.workers:
                during = self.rate_during.get(w.n, 0) - self.rate_before.get(w.n, 0)
                rows.append(
                    (f"worker #{w.n}: chunks sent per second while slow", f"{during / span:.1f}")
                )
        for needle, count in self._log_lines().items():
            rows.append((f"worker log lines: {needle!r}", count))
        rows.append(
            ("outcomes dropped while the claim was owned (job run again)", len(self.dropped))
        )
        if self.name in ("refused-writes", "failover", "all"):
            rows.append(
                (
                    "outcomes whose lease ended while the server was down or refused writes "
                    "(re-run, journaled)",
                    self.expired_in_outage,
                )
            )
        if "slow" in self.windows:
            rows.append(
                (
                    "statements (chunks) the proxies delayed",
                    sum(x.stats.delayed for p in self.proxies for x in p.links),
                )
            )
            rows.append(
                (
                    "outcomes whose lease ended while slow: a lease under the default, or a "
                    "cut connection (re-run, journaled)",
                    self.short_when_slow,
                )
            )
        if self.holes:
            rows.append(
                (
                    "outcomes a black-holed worker held past its lease (re-run, journaled)",
                    self.lost_to_partition,
                )
            )
        rows.append(("handler's return -> its completion written", self.settle_lag))
        rows.append(("claims released before any SIGTERM (orphan release)", self.early_releases))
        rows.append(
            (
                "workers SIGKILLed after a SIGTERM they ignored",
                self.counters["workers hung at SIGTERM"],
            )
        )
        return rows

    def _log_lines(self) -> Counter[str]:
        """How often each line a fault may cause appears in the worker logs, all together."""
        logs = Counter[str]()
        for w in self.workers:
            text = w.log_path.read_text(errors="replace")
            for needle in (
                "the database refused to store this outcome",
                "read-only transaction",
                "database error in the worker loop",
                "heartbeat failed",
                "LISTEN connection lost",
                "released job",
                "no longer holds its claim",
            ):
                logs[needle] += text.count(needle)
        return logs


def dropped_outcomes(
    events: list[records.Event],
    runs: list[records.Run],
    faults: records.Faults,
    leases: dict[str, float],
    refused: Sequence[tuple[float, float]] = (),
    partitioned: Sequence[tuple[int, float, float]] = (),
    slowed: Sequence[tuple[float, float]] = (),
    short: frozenset[str] | set[str] = frozenset(),
    cuts: Sequence[tuple[float, float]] = (),
) -> tuple[list[str], int, int, int]:
    """Claims whose handler returned an outcome while the claim was still owned (before
    its lease ended, and before any shutdown), and which then ended by an interruption
    (stale-recovered or released) instead of that outcome: the worker dropped a result it
    had, and the job ran again. The soak's check explains such a re-run by the
    interruption; it is still a write the worker gave up on.

    Also returns how many such claims are explained by ``refused``: windows in which the
    server was down or refused every write, holding both the handler's return and the claim's end,
    so the outcome could not be written before the lease ended; and how many by
    ``partitioned``: (pid, start, end) of a worker whose connections were black-holed
    when its handler returned; and how many by ``slowed``: windows of a slow database in
    which a kind with a ``short`` lease (below the workers' default) lost its claim, or in
    which a connection fault (``cuts``: backend kills, restarts) came between the
    handler's return and the lease's end: a slowed loop iteration that loses its
    connection takes a reconnect and its statements again, longer than a 4 s lease."""
    claims: dict[tuple[int, int], records.Event] = {}
    ends: dict[tuple[int, int], records.Event] = {}
    for e in sorted(events, key=lambda e: e.at):
        key = (e.job, e.attempt)
        if e.event == "claimed":
            claims[key] = e
        elif e.event in history.INTERRUPTIONS and key not in ends:
            ends[key] = e
    out: list[str] = []
    explained = partition = too_short = 0
    for r in runs:
        key = (r.job, r.attempt)
        c, end = claims.get(key), ends.get(key)
        if c is None or end is None or r.end is None or r.outcome in (None, "pause-cancel"):
            continue
        if records.pid_of(c.worker) != r.pid:
            continue
        stop = min(
            c.at + leases.get(r.kind, 0.0),
            faults.terms.get(r.pid, float("inf")),
            faults.kills.get(r.pid, float("inf")) - CUT_OFF_MARGIN,
        )
        if r.end < stop - 0.05:
            if any(start <= r.end and stop <= end for start, end in refused):
                explained += 1
                continue
            if any(pid == r.pid and start <= r.end <= end for pid, start, end in partitioned):
                partition += 1
                continue
            if any(start <= r.end <= end for start, end in slowed) and (
                r.kind in short or any(a <= stop and b >= r.end for a, b in cuts)
            ):
                too_short += 1
                continue
            out.append(
                f"job {r.job} ({r.kind}) attempt {r.attempt}: pid {r.pid}'s handler returned "
                f"{r.outcome} at {r.end:.3f}, {stop - r.end:.2f}s before its claim could end, "
                f"and the claim ended {end.event} at {end.at:.3f} by {end.worker}"
            )
    return out, explained, partition, too_short
