"""Would a claim on the connection that received the NOTIFY be faster than one on
another idle connection? (issue 27, pickup p50.)

    python -m benchmarks.notify_wake [--dsn DSN] [--samples 200]

A worker hears of a new job on its LISTEN connection and claims on its loop's
connection, whose backend has been asleep: waking it is part of every pickup. Here the
same connection can do both. Per sample, after an idle gap of 20-60 ms (jittered), one
session commits ``pg_notify``; from its return until the statement issued on hearing it
comes back, timed for two statements (``SELECT 1``, and a one-row ``UPDATE`` with its
commit, the shape of a claim) and two setups: ``same`` (the listening connection runs
the statement) and ``other`` (a second, idle connection runs it). Setups and statements
alternate in random order. A scratch table ``notify_wake`` in the DSN's database is
dropped at the end. Nothing is asserted; it prints the medians and the 90th percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from typing import Any

import asyncpg

from benchmarks.profile import DEFAULT_ADMIN_DSN

STATEMENTS = {
    "select": ("SELECT 1", False),
    "update": ("UPDATE notify_wake SET n = n + 1 WHERE id = $1", True),
}


async def measure(dsn: str, samples: int) -> dict[str, dict[str, list[float]]]:
    sender = await asyncpg.connect(dsn)
    await sender.execute(
        "DROP TABLE IF EXISTS notify_wake; "
        "CREATE TABLE notify_wake (id int PRIMARY KEY, n int); "
        "INSERT INTO notify_wake VALUES (1, 0), (2, 0)"
    )
    same = await asyncpg.connect(dsn)
    other, other_listener = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    heard = {"same": asyncio.Event(), "other": asyncio.Event()}
    await same.add_listener("wake_same", lambda *_: heard["same"].set())
    await other_listener.add_listener("wake_other", lambda *_: heard["other"].set())
    runs_on = {"same": same, "other": other}
    row = {"same": 1, "other": 2}
    out: dict[str, dict[str, list[float]]] = {s: {q: [] for q in STATEMENTS} for s in heard}
    try:
        for _ in range(samples):
            for setup in random.sample(list(heard), 2):
                for name in random.sample(list(STATEMENTS), 2):
                    text, takes_row = STATEMENTS[name]
                    args: tuple[Any, ...] = (row[setup],) if takes_row else ()
                    heard[setup].clear()
                    await asyncio.sleep(random.uniform(0.02, 0.06))
                    await sender.execute(f"SELECT pg_notify('wake_{setup}', 'x')")
                    t0 = time.perf_counter()
                    await heard[setup].wait()
                    await runs_on[setup].execute(text, *args)
                    out[setup][name].append((time.perf_counter() - t0) * 1000)
    finally:
        await sender.execute("DROP TABLE IF EXISTS notify_wake")
        for c in (sender, same, other, other_listener):
            await c.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", default=DEFAULT_ADMIN_DSN)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--json", default=None, help="write every sample here")
    args = p.parse_args()
    out = asyncio.run(measure(args.dsn, args.samples))
    print(f"{args.samples} samples each; ms from the notifying commit's return")
    print(f"{'setup':8} {'statement':10} {'p50':>7} {'p90':>7}")
    for setup, by_statement in out.items():
        for name, xs in by_statement.items():
            xs = sorted(xs)
            p90 = xs[int(len(xs) * 0.9)]
            print(f"{setup:8} {name:10} {statistics.median(xs):7.3f} {p90:7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
