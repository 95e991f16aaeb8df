"""CPU split of T1's quick drains: this process (the worker) and the server, per job; the
claims each made and their mean batch."""
import asyncio, os, time, json, sys
from collections import Counter
import asyncpg
from benchmarks.scenarios import groups as G
from benchmarks.scenarios import groups_venturi as GV
from benchmarks.common import scratch_database
from venturi import db, sql
from venturi.runtime import claimer as C
from venturi.runtime import completer as CO

COUNTS = Counter()
def wrap(cls, name, key):
    orig = getattr(cls, name)
    async def w(self, *a, **k):
        t = time.perf_counter()
        r = await orig(self, *a, **k)
        COUNTS[key + "_calls"] += 1
        COUNTS[key + "_s"] += time.perf_counter() - t
        return r
    setattr(cls, name, w)
wrap(C.Claimer, "fill", "ordinary")
wrap(C.Claimer, "fill_grouped", "grouped")
wrap(CO.Completer, "settle", "settle")

def pg_cpu():
    tot = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit(): continue
        try:
            with open(f"/proc/{pid}/stat") as f: st = f.read()
            with open(f"/proc/{pid}/comm") as f: comm = f.read().strip()
        except OSError: continue
        if comm.startswith("postgres"):
            parts = st.rsplit(")", 1)[1].split()
            tot += int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])
    return tot / os.sysconf("SC_CLK_TCK")

orig_with = GV.with_worker
RES = {}
async def with_worker(dsn, task, until, limit_s):
    COUNTS.clear()
    p0, s0, w0 = time.process_time(), pg_cpu(), time.monotonic()
    r = await orig_with(dsn, task, until, limit_s)
    RES["py_cpu"] = time.process_time() - p0
    RES["pg_cpu"] = pg_cpu() - s0
    RES["wall"] = time.monotonic() - w0
    RES.update(COUNTS)
    return r
G.with_worker = with_worker

async def main():
    plan = G.QUICK
    out = []
    async with scratch_database(os.environ.get("VENTURI_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"), "venturi_split") as dsn:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=sql.DEFAULT_SCHEMA)
        for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
            for cfg in G.T1_CONFIGS:
                if cfg[0] not in ("plain", "uniform-cap1", "zipf-cap5"): continue
                RES.clear()
                r = await G.t1_once(conn, dsn, plan, cfg)
                n = plan.t1_jobs
                row = {"config": cfg[0], "jobs_per_s": round(r["jobs_per_s"]), **{k: round(v, 3) if isinstance(v, float) else v for k, v in RES.items()}}
                row["py_us_per_job"] = round(RES["py_cpu"] / n * 1e6)
                row["pg_us_per_job"] = round(RES["pg_cpu"] / n * 1e6)
                row["jobs_per_grouped_claim"] = round(n / max(1, RES.get("grouped_calls", 0)), 1)
                row["jobs_per_ordinary_claim"] = round(n / max(1, RES.get("ordinary_calls", 0)), 1)
                print(json.dumps(row), flush=True)
                out.append(row)
        await conn.close()
    json.dump(out, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/split/out.json", "w"), indent=1)
asyncio.run(main())
