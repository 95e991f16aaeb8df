import asyncio
import sys
import time

import asyncpg
import msgspec

import venturi
from venturi import testing


class C(msgspec.Struct):
    n: int


@venturi.task(kind="ab_enq")
async def h(ctx, carry: C) -> None:
    return None


async def main():
    f = testing.DatabaseFactory("postgresql://postgres@127.0.0.1:5432/postgres")
    await f.setup()
    dsn = await f.create()
    conn = await asyncpg.connect(dsn)
    try:
        jobs = [h.job(C(i)) for i in range(1000)]
        for _ in range(3):
            await venturi.enqueue_many(conn, jobs)
        t = time.perf_counter()
        for _ in range(30):
            await venturi.enqueue_many(conn, jobs)
        bulk = 30000 / (time.perf_counter() - t)
        t = time.perf_counter()
        for i in range(1000):
            await h.enqueue(conn, C(i))
        single = 1000 / (time.perf_counter() - t)
        print(f"{sys.argv[1]} bulk {bulk:,.0f}/s single {single:,.0f}/s")
    finally:
        await conn.close()
        await f.drop(dsn)
        await f.teardown()


asyncio.run(main())
