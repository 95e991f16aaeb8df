"""The faults of the network and server scenarios (a mixin of ``scenarios.Scenario``):
the failover (the primary stopped hard, the standby promoted), black-holes (a worker's
open connections stop forwarding, healed later or never: ``Hole`` records one), writes
refused for ``READ_ONLY_SECONDS`` (``default_transaction_read_only`` switched on and off
from a session of its own), and a slow database (every proxy delays each chunk by a time
drawn from ``SLOW_DELAY``, then lifts it)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from tests.support import sql as pgsql

from . import records, standby
from .fleet import Worker

READ_ONLY_SECONDS = 5.0
SLOW_DELAY = (0.05, 0.5)


@dataclass
class Hole:
    """A black-holed set of links of one worker's proxy."""

    worker: int
    proxy: Any  # a Proxy, or a Twin
    at: float
    links: list[Any]
    healed: float | None = None


class ScenarioFaults:
    """What a scenario does to the network and the server; see the module's docstring."""

    # Provided by scenarios.Scenario.
    pair: standby.Pair | None
    proxies: list[Any]
    windows: dict[str, tuple[float, float]]
    holes: list[Hole]
    control: Any
    fault_at: float | None
    fault_end: float | None
    rate_before: dict[int, float]
    rate_during: dict[int, float]
    # Provided by harness.Harness.
    dsn: str
    outage: float | None
    workers: list[Worker]
    faults: records.Faults
    counters: Counter[str]

    if TYPE_CHECKING:  # provided by harness.Harness too

        def log(self, message: str) -> None: ...

        def running(self) -> list[Worker]: ...

    def _a_running_worker(self) -> int:
        """A running worker not black-holed already (the first such)."""
        held = {h.worker for h in self.holes if h.healed is None}
        return next(w.n for w in self.running() if w.n not in held)

    async def heal_all(self) -> None:
        for n in sorted({h.worker for h in self.holes if h.healed is None}):
            await self.heal(n)

    async def failover(self) -> None:
        assert self.pair is not None
        start = time.time()
        self.fault_at = self.outage = start
        took = await asyncio.to_thread(self.pair.fail_over)
        self.fault_end = time.time()
        self.outage = None
        self.windows["failover"] = (start, self.fault_end)
        self.faults.connection.append((start, self.fault_end + 1))
        self.counters["failovers"] += 1
        self.log(
            f"failover: primary :{self.pair.primary.port} stopped (-m immediate), standby "
            f":{self.pair.standby.port} promoted; writable after {took:.2f}s"
        )

    async def blackhole(self, n: int) -> None:
        proxy = self.proxies[n - 1]
        links = proxy.open_links()
        proxy.blackhole(links, new=False)
        at = time.time()
        self.holes.append(Hole(n, proxy, at, links))
        # Recorded as an open-ended connection fault of this worker's claims; closed when
        # the partition heals or at the end.
        self.faults.connection.append((at, float("inf")))
        self.counters["black-holes"] += 1
        self.log(f"black-holed worker #{n}: its {len(links)} open connection(s)")

    async def heal(self, n: int) -> None:
        for hole in self.holes:
            if hole.worker == n and hole.healed is None:
                hole.proxy.restore(hole.links, new=False)
                hole.healed = time.time()
                self.log(f"healed worker #{n}'s partition after {hole.healed - hole.at:.1f}s")

    async def _control(self) -> Any:
        if self.control is None or self.control.is_closed():
            # A session-level setting outranks the server's: this session can always
            # switch writes back on.
            self.control = await asyncpg.connect(
                self.dsn, timeout=5, server_settings={"default_transaction_read_only": "off"}
            )
        return self.control

    async def refuse_writes(self) -> None:
        conn = await self._control()
        await conn.execute(pgsql.statement("settings_read_only_on"))
        await conn.fetchval(pgsql.statement("config_reload"))
        self.fault_at = time.time()
        self.counters["write refusals"] += 1
        self.log(f"writes refused (default_transaction_read_only on) for {READ_ONLY_SECONDS}s")
        await asyncio.sleep(READ_ONLY_SECONDS)  # stays: how long the fault lasts is its point
        await conn.execute(pgsql.statement("settings_read_only_reset"))
        await conn.fetchval(pgsql.statement("config_reload"))
        self.fault_end = time.time()
        self.windows["writes refused"] = (self.fault_at, self.fault_end)
        self.faults.connection.append((self.fault_at, self.fault_end + 1))
        self.log("writes allowed again")

    def _rates(self) -> dict[int, float]:
        """Chunks each worker sent so far, for its statement rate."""
        return {
            w.n: float(sum(x.stats.chunks_up for x in self.proxies[w.n - 1].links))
            for w in self.workers
        }

    async def slow(self) -> None:
        self.fault_at = time.time()
        self.rate_before = self._rates()
        for p in self.proxies:
            p.delay(SLOW_DELAY)
        self.counters["slow periods"] += 1
        self.log(f"every worker's statements delayed {SLOW_DELAY[0]}-{SLOW_DELAY[1]}s")

    async def fast(self) -> None:
        self.fault_end = time.time()
        assert self.fault_at is not None
        self.windows["slow"] = (self.fault_at, self.fault_end)
        self.rate_during = self._rates()
        for p in self.proxies:
            p.restore()
        self.log("delays lifted")
