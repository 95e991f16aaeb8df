"""A claim with completions, or a heartbeat, while the rest of the fleet holds many jobs
(issue 27).

    python -m benchmarks.fleet_claims --a-rev HEAD~1 [--fleet 2000] [--claims 600]
        [--statement claim|heartbeat|fail] [--json out.json]

One database of its own, statistics taken while nothing is claimed (an ANALYZE of an
idle queue); then another claimant, "the fleet", claims ``--fleet`` jobs and keeps them
(long-running jobs of other workers). Two connections then loop ``job_claim`` of 10 rows
carrying the previous claim's 10 completions, alternating claim by claim: A runs the
statement as rendered at ``--a-rev`` (``git show`` of its template), B as rendered now.
With ``--statement heartbeat`` each side instead claims 10 jobs of its own once and then
loops ``job_heartbeat_if_owned`` renewing their leases (A at ``--a-rev``, B now), as a
worker's heartbeat does every tick for the jobs it runs; with ``--statement fail`` each
side claims ``--claims`` jobs of its own and settles each as a failure
(``job_fail_if_owned``, retried in a minute), one statement per job. Printed: p50 and p90
of each side's round trip, in milliseconds. Nothing is asserted.
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
STATEMENTS = {
    "claim": "job_claim",
    "heartbeat": "job_heartbeat_if_owned",
    "fail": "job_fail_if_owned",
}


def _statement_at(rev: str, name: str) -> str:
    """Statement ``name`` as rendered from its template at ``rev`` (its fragments from
    this tree)."""
    template = f"venturi/sql_templates/statements/{name}.sql.j2"
    source = subprocess.run(
        ["git", "show", f"{rev}:{template}"], cwd=ROOT, check=True, capture_output=True, text=True
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
    name = STATEMENTS[args.statement]
    texts = {"A": _statement_at(args.a_rev, name), "B": sql.statement(name)}
    sides: dict[str, Any] = {}
    for side, text in texts.items():
        c = await asyncpg.connect(dsn)
        sides[side] = {"stmt": await c.prepare(text), "token": uuid.uuid4(), "done": []}
        if args.statement != "claim":  # the jobs this side's worker runs
            own = db.Claimant(f"bench-{side}")
            sides[side]["token"] = own.token
            held = await db.claims.job_claim(
                conn, schema=sql.DEFAULT_SCHEMA, claimant=own, kinds=[kind], leases=[900.0],
                floor=0, limit=10 if args.statement == "heartbeat" else args.claims,
            )  # fmt: skip
            sides[side]["done"] = [(r["id"], r["attempt"]) for r in held.claimed]
    times: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(args.claims):
        for side in ("A", "B") if i % 2 else ("B", "A"):
            s = sides[side]
            done = s["done"]
            t0 = time.perf_counter()
            if args.statement == "fail":  # one failure settled, retried in a minute
                job_id, attempt = done[i]
                await s["stmt"].fetch(
                    s["token"], job_id, attempt, "failed", "bench", None, 60.0, False, None
                )
                times[side].append(time.perf_counter() - t0)
                continue
            if args.statement == "heartbeat":
                await s["stmt"].fetch(
                    s["token"], [d[0] for d in done], [d[1] for d in done], [60.0] * len(done)
                )
                times[side].append(time.perf_counter() - t0)
                continue
            rows = await s["stmt"].fetch(
                "bench", [kind], [60.0], 0, 10, [d[0] for d in done], [d[1] for d in done],
                [None] * len(done), s["token"], True,
            )  # fmt: skip
            times[side].append(time.perf_counter() - t0)
            s["done"] = [(r["id"], r["attempt"]) for r in rows if not r["settled"]]
    await conn.close()
    out: dict[str, Any] = {
        "commit": git_head(),
        "a_rev": args.a_rev,
        "fleet": args.fleet,
        "statement": name,
    }
    for side, v in times.items():
        v = sorted(v[20:])  # the first executions plan the statement
        out[side] = {"p50_ms": v[len(v) // 2] * 1000, "p90_ms": v[int(len(v) * 0.9)] * 1000}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fleet_claims", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get("VENTURI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    p.add_argument("--a-rev", required=True, help="the git revision of side A's statement")
    p.add_argument("--statement", choices=sorted(STATEMENTS), default="claim")
    p.add_argument("--fleet", type=int, default=2_000)
    p.add_argument("--claims", type=int, default=600)
    p.add_argument("--json")
    args = p.parse_args(argv)
    import uvloop

    out = uvloop.run(amain(args))
    text = (
        f"fleet_claims on {out['commit']}, A = {out['statement']} at {args.a_rev}, B = now; "
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
