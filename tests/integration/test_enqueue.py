"""Enqueueing and reading jobs back, against a real database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import sql as test_sql
from tests.support import wait_until
from tests.support.claims import claim
from venturi import Context, Priority, db, sql

# The claimant of the jobs these tests claim and settle through the store.
W1 = db.Claimant("w:1")


class Fetch(msgspec.Struct):
    url: str
    pages_done: int = 0


@pytest.fixture
def fetch(kinds: list[str]) -> venturi.Task[Fetch]:
    @venturi.task(kind="fetch", priority=Priority.HIGH, max_failures=7)
    async def handler(ctx: Context[Any], carry: Fetch) -> None:
        return None

    return handler


@pytest.fixture
def mail(kinds: list[str]) -> venturi.Task[Any]:
    @venturi.task(kind="mail")
    async def handler(ctx: Context[Any], carry: dict[str, str]) -> None:
        return None

    return handler


async def test_enqueue_and_get_job(conn: asyncpg.Connection, fetch: venturi.Task[Fetch]) -> None:
    job_id = await fetch.enqueue(conn, Fetch("https://a.test"))
    job = await venturi.get_job(conn, job_id)
    assert job is not None
    assert (job.id, job.kind, job.status, job.priority) == (
        job_id,
        "fetch",
        "pending",
        Priority.HIGH,
    )
    assert job.carry == {"url": "https://a.test", "pages_done": 0}
    assert (job.attempt, job.failures, job.max_failures) == (0, 0, 7)
    assert job.visible_at <= datetime.now(UTC)
    assert job.finished_at is None and job.result is None and job.last_error is None
    assert await venturi.get_job(conn, job_id + 1000) is None
    assert await venturi.get_job(conn, 2**63) is None  # past bigint: no job, not an error


async def test_enqueue_on_a_pool(pool: asyncpg.Pool, fetch: venturi.Task[Fetch]) -> None:
    job_id = await fetch.enqueue(pool, Fetch("u"), priority=Priority.LOW)
    job = await venturi.get_job(pool, job_id)
    assert job is not None and job.priority is Priority.LOW


async def test_enqueue_commits_with_the_callers_transaction(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    tr = conn.transaction()
    await tr.start()
    rolled_back = await fetch.enqueue(conn, Fetch("rolled back"))
    await tr.rollback()
    assert await venturi.get_job(conn, rolled_back) is None
    async with conn.transaction():
        kept = await fetch.enqueue(conn, Fetch("kept"))
    assert (await venturi.get_job(conn, kept)) is not None


async def test_scheduling_at_and_after(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    at = datetime.now(UTC) + timedelta(hours=2)
    a = await venturi.get_job(conn, await fetch.enqueue(conn, Fetch("a"), at=at))
    b = await venturi.get_job(
        conn, await fetch.enqueue(conn, Fetch("b"), after=timedelta(minutes=10))
    )
    assert a is not None and b is not None
    assert abs((a.visible_at - at).total_seconds()) < 0.01
    assert timedelta(minutes=9) < b.visible_at - b.created_at < timedelta(minutes=11)
    with pytest.raises(venturi.ConfigError, match="not both"):
        await fetch.enqueue(conn, Fetch("c"), at=at, after=5)
    with pytest.raises(venturi.ConfigError, match="timezone"):
        await fetch.enqueue(conn, Fetch("c"), at=datetime(2030, 1, 1))
    # A NUL in a key reached the database, which refused the text: the driver's error.
    with pytest.raises(venturi.ConfigError, match="key must be a string without NUL"):
        await fetch.enqueue(conn, Fetch("c"), key="k\x00")
    with pytest.raises(venturi.ConfigError, match="key must be a string without NUL"):
        await venturi.enqueue_many(conn, [fetch.job(Fetch("c"), key="k\x00")])
    # Past PostgreSQL's timestamps, it failed with the driver's error.
    with pytest.raises(venturi.ConfigError, match="after must be at most 100 years"):
        await fetch.enqueue(conn, Fetch("c"), after=1e15)
    assert await _count(conn) == 2


async def _count(conn: asyncpg.Connection) -> int:
    return sum(r["jobs"] for r in await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA))


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "x"},  # a dict, not the Struct
        "https://a.test",  # a string
        Fetch(url=5),  # type: ignore[arg-type]  # wrong field type
        None,
    ],
)
async def test_wrong_carry_type_is_a_type_error_and_writes_nothing(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch], bad: Any
) -> None:
    with pytest.raises(TypeError, match=r"carry of task 'fetch'( must be Fetch|: Fetch\.url)"):
        await fetch.enqueue(conn, bad)
    assert await _count(conn) == 0


async def test_a_wrong_field_says_which_field_and_what_it_must_be(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    with pytest.raises(TypeError) as raised:
        await fetch.enqueue(conn, Fetch(url=5))  # type: ignore[arg-type]
    assert str(raised.value) == "carry of task 'fetch': Fetch.url must be str, got int"
    assert await _count(conn) == 0


async def test_oversized_carry_refused(conn: asyncpg.Connection, kinds: list[str]) -> None:
    @venturi.task(kind="small", max_carry_bytes=100)
    async def handler(ctx: Any, carry: str) -> None:
        return None

    await handler.enqueue(conn, "x" * 50)
    with pytest.raises(ValueError, match="over the limit of 100"):
        await handler.enqueue(conn, "x" * 200)
    assert await _count(conn) == 1


async def test_key_deduplicates_while_unfinished(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch], mail: venturi.Task[Any]
) -> None:
    first = await fetch.enqueue(conn, Fetch("a"), key="user-1")
    again = await fetch.enqueue(conn, Fetch("b"), key="user-1")
    other_key = await fetch.enqueue(conn, Fetch("c"), key="user-2")
    other_kind = await mail.enqueue(conn, {"to": "x"}, key="user-1")
    assert again == first
    assert len({first, other_key, other_kind}) == 3
    job = await venturi.get_job(conn, first)
    assert job is not None and job.carry["url"] == "a"  # the first carry is kept
    # Once the holder is finished, the key is free again.
    rows = await claim(conn, W1, ["fetch"], limit=10)
    done = [r for r in rows if r["id"] == first]
    await db.settle.job_complete_many_if_owned(
        conn,
        schema="venturi",
        claimant=W1,
        ids=[first],
        attempts=[done[0]["attempt"]],
        results=[None],
    )
    fresh = await fetch.enqueue(conn, Fetch("d"), key="user-1")
    assert fresh not in (first, other_key)


async def test_enqueue_many_in_order_with_keys(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch], mail: venturi.Task[Any]
) -> None:
    existing = await fetch.enqueue(conn, Fetch("old"), key="k1")
    ids = await venturi.enqueue_many(
        conn,
        [
            fetch.job(Fetch("a")),
            fetch.job(Fetch("b"), key="k1"),  # held by `existing`
            mail.job({"to": "x"}, priority=Priority.HIGH, after=60),
            fetch.job(Fetch("c"), key="k2"),
            fetch.job(Fetch("d"), key="k2"),  # same batch, same key
            fetch.job(Fetch("e")),
        ],
    )
    assert len(ids) == 6
    assert ids[1] == existing
    assert ids[4] == ids[3]
    assert len({ids[0], ids[2], ids[3], ids[5], existing}) == 5
    jobs = [await venturi.get_job(conn, i) for i in ids]
    assert [j.carry.get("url") if j else None for j in jobs] == ["a", "old", None, "c", "c", "e"]
    assert jobs[2] is not None and jobs[2].priority is Priority.HIGH and jobs[2].kind == "mail"
    assert await venturi.enqueue_many(conn, []) == []
    with pytest.raises(TypeError, match=r"task\.job"):
        await venturi.enqueue_many(conn, [Fetch("raw")])  # type: ignore[list-item]


async def test_enqueue_many_bulk(
    dsn: str, conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    ids = await venturi.enqueue_many(conn, (fetch.job(Fetch(str(i))) for i in range(5000)))
    assert len(set(ids)) == 5000
    assert await _count(conn) == 5000
    # Each id is the job of the input at the same position, also while another batch
    # is inserted at the same time.
    for i in (0, 1, 2, 1234, 4998, 4999):
        job = await venturi.get_job(conn, ids[i])
        assert job is not None and job.carry["url"] == str(i)
    other = await asyncpg.connect(dsn)
    try:
        a, b = await asyncio.gather(
            venturi.enqueue_many(conn, [fetch.job(Fetch(f"a{i}")) for i in range(3000)]),
            venturi.enqueue_many(other, [fetch.job(Fetch(f"b{i}")) for i in range(3000)]),
        )
    finally:
        await other.close()
    for batch, tag in ((a, "a"), (b, "b")):
        for i in (0, 999, 2999):
            job = await venturi.get_job(conn, batch[i])
            assert job is not None and job.carry["url"] == f"{tag}{i}"


async def test_an_unkeyed_batch_stores_each_rows_kind_priority_and_backstop(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch], mail: venturi.Task[Any]
) -> None:
    # A batch of one task binds its kind, priority and backstop once (db.enqueue.uniform);
    # a batch that mixes them binds each row's.
    same = await venturi.enqueue_many(
        conn, [fetch.job(Fetch(str(i)), priority=Priority.LOW) for i in range(3)]
    )
    mixed = await venturi.enqueue_many(
        conn,
        [
            fetch.job(Fetch("a")),
            mail.job({"to": "x"}, priority=Priority.LOW),
            fetch.job(Fetch("b"), priority=Priority.NORMAL),
        ],
    )
    stored = []
    for job_id in same + mixed:
        job = await venturi.get_job(conn, job_id)
        assert job is not None
        stored.append((job.kind, job.priority, job.max_failures))
    default = mail.max_failures  # the default backstop, not fetch's 7
    assert default != 7
    assert stored == [
        ("fetch", Priority.LOW, 7),
        ("fetch", Priority.LOW, 7),
        ("fetch", Priority.LOW, 7),
        ("fetch", Priority.HIGH, 7),
        ("mail", Priority.LOW, default),
        ("fetch", Priority.NORMAL, 7),
    ]


async def test_bad_carry_in_a_batch_writes_nothing(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    with pytest.raises(TypeError):
        await venturi.enqueue_many(conn, [fetch.job(Fetch("ok")), fetch.job("bad")])  # type: ignore[arg-type]
    assert await _count(conn) == 0


async def test_journal_of_a_new_job(conn: asyncpg.Connection, fetch: venturi.Task[Fetch]) -> None:
    job_id = await fetch.enqueue(conn, Fetch("a"))
    journal = await venturi.get_journal(conn, job_id)
    assert [(e.event, e.attempt) for e in journal] == [("enqueued", 0)]
    assert await venturi.get_journal(conn, 10**9) == []


async def test_unapplied_schema_is_a_clear_error(empty_dsn: str, kinds: list[str]) -> None:
    conn = await asyncpg.connect(empty_dsn)
    try:
        with pytest.raises(venturi.SchemaError, match="venturi schema apply"):
            await db.schema.schema_version(conn, schema="venturi")
    finally:
        await conn.close()


# --- bulk enqueue by binary COPY (db.enqueue.job_copy_in, from COPY_MIN_ROWS jobs) -------


def _mixed(fetch: venturi.Task[Fetch], mail: venturi.Task[Any], at: datetime) -> list[Any]:
    """Every way a job can be built: kinds, priorities, at, after, a backoff, defaults."""
    return [
        fetch.job(Fetch("a")),
        mail.job({"to": "x"}, priority=Priority.LOW, after=90),
        fetch.job(Fetch("b", 3), at=at),
        mail.job({"to": "y"}, after=0.25),
        fetch.job(Fetch("c"), priority=Priority.NORMAL),
    ]


async def _stored(conn: asyncpg.Connection, ids: list[int]) -> list[tuple[Any, ...]]:
    """What the enqueue wrote of each job, but its id and the clock."""
    out = []
    for i in ids:
        j = await venturi.get_job(conn, i)
        assert j is not None
        row = await conn.fetchrow(test_sql.statement("job_backoff_columns"), i)
        after = (j.visible_at - j.created_at).total_seconds()
        out.append(
            (
                *(j.kind, j.status, j.priority, j.carry, j.key, j.attempt, j.failures),
                *(j.max_failures, j.visible_at if after > 1000 else round(after, 3), *row),
            )
        )
    return out


async def test_copy_writes_what_the_insert_writes(
    conn: asyncpg.Connection, fetch: venturi.Task[Fetch], kinds: list[str]
) -> None:
    @venturi.task(kind="mail", backoff=venturi.Backoff.exponential(2, 3, 60), max_failures=4)
    async def mail(ctx: Context[Any], carry: dict[str, str]) -> None:
        return None

    at = datetime.now(UTC) + timedelta(days=2)
    specs = _mixed(fetch, mail, at)
    inserted = await db.enqueue.job_insert_many(conn, schema=sql.DEFAULT_SCHEMA, specs=specs)
    copied = await db.enqueue.job_copy_in(conn, schema=sql.DEFAULT_SCHEMA, specs=specs)
    assert copied == sorted(copied) and min(copied) > max(inserted)
    assert await _stored(conn, copied) == await _stored(conn, inserted)
    with pytest.raises(ValueError, match="unkeyed"):
        await db.enqueue.job_copy_in(
            conn, schema=sql.DEFAULT_SCHEMA, specs=[fetch.job(Fetch("k"), key="k")]
        )


async def test_a_large_batch_goes_by_copy_in_order_with_one_notification(
    dsn: str, conn: asyncpg.Connection, fetch: venturi.Task[Fetch], mail: venturi.Task[Any]
) -> None:
    n = db.enqueue.COPY_MIN_ROWS
    heard: list[str] = []
    listener = await asyncpg.connect(dsn)
    try:
        await listener.add_listener(sql.channel(sql.DEFAULT_SCHEMA), lambda *a: heard.append(a[3]))
        specs = [fetch.job(Fetch(str(i))) if i % 2 else mail.job({"i": str(i)}) for i in range(n)]
        ids = await venturi.enqueue_many(conn, specs)
        # A marker after it: notifications arrive in commit order, so when the marker's
        # is in, every notification of the batch is too.
        await mail.enqueue(conn, {"marker": "1"})
        await wait_until(lambda: len(heard) >= 2)
    finally:
        await listener.close()
    assert len(heard) == 2 and heard[1] == "mail"
    assert sorted(heard[0].split(",")) == ["fetch", "mail"]
    assert len(ids) == n and ids == sorted(ids)
    for i in (0, 1, n // 2, n - 1):
        job = await venturi.get_job(conn, ids[i])
        assert job is not None and job.kind == ("fetch" if i % 2 else "mail")
        assert job.carry == ({"url": str(i), "pages_done": 0} if i % 2 else {"i": str(i)})
    assert await _count(conn) == n + 1


async def test_a_copy_rolls_back_with_the_callers_transaction(
    dsn: str, conn: asyncpg.Connection, fetch: venturi.Task[Fetch]
) -> None:
    n = db.enqueue.COPY_MIN_ROWS

    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        async with conn.transaction():
            ids = await venturi.enqueue_many(conn, [fetch.job(Fetch(str(i))) for i in range(n)])
            assert len(ids) == n and await _count(conn) == n
            raise Undo
    assert await _count(conn) == 0
    # Two at once, on two connections: each id is its own input's job.
    other = await asyncpg.connect(dsn)
    try:
        a, b = await asyncio.gather(
            venturi.enqueue_many(conn, [fetch.job(Fetch(f"a{i}")) for i in range(n)]),
            venturi.enqueue_many(other, [fetch.job(Fetch(f"b{i}")) for i in range(n)]),
        )
    finally:
        await other.close()
    for batch, tag in ((a, "a"), (b, "b")):
        for i in (0, 1, n - 1):
            job = await venturi.get_job(conn, batch[i])
            assert job is not None and job.carry["url"] == f"{tag}{i}"


async def test_a_copy_on_a_pool(pool: asyncpg.Pool, fetch: venturi.Task[Fetch]) -> None:
    n = db.enqueue.COPY_MIN_ROWS
    ids = await venturi.enqueue_many(pool, [fetch.job(Fetch(str(i))) for i in range(n)])
    job = await venturi.get_job(pool, ids[-1])
    assert job is not None and job.carry["url"] == str(n - 1)
