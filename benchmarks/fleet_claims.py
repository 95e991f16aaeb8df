"""A claim with completions while the rest of the fleet holds many jobs (issue 27).

    python -m benchmarks.fleet_claims --a-rev HEAD~1 [--fleet 2000] [--claims 600]
        [--json out.json]

One database of its own, statistics taken while nothing is claimed (an ANALYZE of an
idle queue); then another claimant, "the fleet", claims ``--fleet`` jobs and keeps them
(long-running jobs of other workers). Two connections then loop ``job_claim`` of 10 rows
carrying the previous claim's 10 completions, alternating claim by claim: A runs the
statement as rendered at ``--a-rev`` (``git show`` of its template), B as rendered now.
Printed: p50 and p90 of each side's round trip, in milliseconds. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import jinja2

import venturi
from benchmarks import save_run, systems
from benchmarks.compare import DEFAULT_ADMIN_DSN, git_head
from benchmarks.profile import _database
from venturi import db, sql

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = "venturi/sql_templates/statements/job_claim.sql.j2"


def _claim_at(rev: str) -> str:
    """job_claim as rendered from its template at ``rev`` (its fragments from this tree)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{TEMPLATE}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    loader = jinja2.FileSystemLoader(ROOT / "venturi" / "sql_templates")
    env = jinja2.Environment(loader=loader, keep_trailing_newline=True)
    return env.from_string(source).render(s='"venturi"')


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    dsn = await _database(args.dsn, f"bench_venturi_fleet_{os.getpid()}", create=True)
    conn = await asyncpg.connect(dsn)
    await db.schema.apply_schema(conn, schema=sql.DEFAULT_SCHEMA)
    kind = systems.venturi_noop.kind
    jobs = [systems.venturi_noop.job(systems.Noop(i)) for i in range(args.fleet + 20_000)]
    await venturi.enqueue_many(conn, jobs)
    await conn.execute(sql.statement("maintenance/analyze"))  # nothing claimed yet
    if args.fleet:
        fleet = db.Claimant("fleet")
        await db.claims.job_claim(
            conn, schema=sql.DEFAULT_SCHEMA, claimant=fleet, kinds=[kind], leases=[900.0],
            floor=0, limit=args.fleet,
        )  # fmt: skip
    texts = {"A": _claim_at(args.a_rev), "B": sql.statement("job_claim")}
    sides: dict[str, Any] = {}
    for side, text in texts.items():
        c = await asyncpg.connect(dsn)
        sides[side] = {"stmt": await c.prepare(text), "token": uuid.uuid4(), "done": []}
    times: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(args.claims):
        for side in ("A", "B") if i % 2 else ("B", "A"):
            s = sides[side]
            done = s["done"]
            t0 = time.perf_counter()
            rows = await s["stmt"].fetch(
                "bench", [kind], [60.0], 0, 10, [d[0] for d in done], [d[1] for d in done],
                [None] * len(done), s["token"], True,
            )  # fmt: skip
            times[side].append(time.perf_counter() - t0)
            s["done"] = [(r["id"], r["attempt"]) for r in rows if not r["settled"]]
    await conn.close()
    out: dict[str, Any] = {"commit": git_head(), "a_rev": args.a_rev, "fleet": args.fleet}
    for side, v in times.items():
        v = sorted(v[20:])  # the first executions plan the statement
        out[side] = {"p50_ms": v[len(v) // 2] * 1000, "p90_ms": v[int(len(v) * 0.9)] * 1000}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fleet_claims", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--a-rev", required=True, help="the git revision of side A's job_claim")
    p.add_argument("--fleet", type=int, default=2_000)
    p.add_argument("--claims", type=int, default=600)
    p.add_argument("--json")
    args = p.parse_args(argv)
    import uvloop

    out = uvloop.run(amain(args))
    text = (
        f"fleet_claims on {out['commit']}, A = job_claim at {args.a_rev}, B = now; "
        f"{args.fleet} jobs held by the fleet\n"
        + "\n".join(
            f"  {side}: p50 {out[side]['p50_ms']:.3f} ms  p90 {out[side]['p90_ms']:.3f} ms"
            for side in ("A", "B")
        )
    )
    print(text)
    if args.json:
        save_run(args.json, out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
