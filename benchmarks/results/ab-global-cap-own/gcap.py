"""One worker of 4 slots draining 200 jobs of 5 ms of a kind with global_cap=2 (and the
same kind grouped over 3 groups of group_cap 2): seconds to drain, per tree."""
import asyncio, json, os, sys, time
import asyncpg
import venturi
from benchmarks.common import scratch_database
from venturi import db, sql


async def main() -> None:
    out = []
    dsn0 = os.environ.get("VENTURI_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    async with scratch_database(dsn0, "venturi_gcab") as dsn:
        conn = await asyncpg.connect(dsn)
        await db.schema.apply_schema(conn, schema=sql.DEFAULT_SCHEMA)
        for grouped in (False, True):
            ran = 0
            done = asyncio.Event()

            @venturi.task(kind=f"gcab_{int(grouped)}", global_cap=2, **({"group_cap": 2} if grouped else {}))
            async def work(ctx: venturi.Context[None], carry: int) -> None:
                nonlocal ran
                await asyncio.sleep(0.005)
                ran += 1
                if ran == 200:
                    done.set()

            await venturi.enqueue_many(conn, [work.job(i, **({"group": f"t{i % 3}"} if grouped else {})) for i in range(200)])
            stop = asyncio.Event()
            w = venturi.Worker(None, dsn, [work], concurrency=4, poll_max=30)
            t0 = time.monotonic()
            run = asyncio.create_task(w.run(stop))
            await asyncio.wait_for(done.wait(), 300)
            took = time.monotonic() - t0
            stop.set()
            await run
            out.append({"grouped": grouped, "seconds": round(took, 3)})
            print(json.dumps(out[-1]), flush=True)
        await conn.close()
    json.dump(out, open(sys.argv[1], "w"))

asyncio.run(main())
