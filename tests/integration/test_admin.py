"""Operator reads and repairs (venturi.admin) against a real database: list, show, retry,
cancel, stats, a frame of top, purge, and the schema upgrade they need."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from rich.console import Console

import venturi
from tests.support import events, wait_for
from tests.support.claims import claim
from tests.support.opsdata import TRACEBACK, S, make, seed
from venturi import JobSpec, admin, db, formatting, sql
from venturi.cli import ops
from venturi.cli import render as views
from venturi.errors import ConfigError

# The claimant of the jobs these tests claim and settle through the store.
W1 = db.Claimant("w:1")


# --- list and show --------------------------------------------------------------------


async def test_list_newest_first_with_filters(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    every = await admin.list_jobs(conn)
    assert [r.id for r in every] == sorted((i for ids in s.ids.values() for i in ids), reverse=True)
    pending = await admin.list_jobs(conn, status="pending")
    assert {r.id for r in pending} == {
        *s["mail_due"],
        *s["mail_scheduled"],
        *s["fetch_failed"],
        *s["fetch_due"],
    }
    mail_done = await admin.list_jobs(conn, status="completed", kind="mail")
    assert [r.id for r in mail_done] == sorted(s["mail_completed"], reverse=True)
    assert len(await admin.list_jobs(conn, limit=2)) == 2
    [dead] = await admin.list_jobs(conn, status="dead")
    assert dead.last_error == TRACEBACK and dead.failures == 1
    with pytest.raises(ConfigError, match="status must be one of"):
        await admin.list_jobs(conn, status="done")
    with pytest.raises(ConfigError, match="limit must be"):
        await admin.list_jobs(conn, limit=0)


async def test_show_has_the_decoded_carry_and_merged_journal(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    detail = await admin.show_job(conn, s["fetch_dead"][0])
    assert detail is not None
    assert detail.job.carry == {"url": "https://x.test"}
    assert events(detail.journal) == ["enqueued", "claimed", "failed", "dead"]
    assert detail.journal[2].detail == TRACEBACK
    # A completed job's routine history comes off the row: the same merged journal.
    done = await admin.show_job(conn, s["mail_completed"][0])
    assert done is not None and events(done.journal) == ["enqueued", "claimed", "completed"]
    assert done.job.result == {"ok": True}
    assert await admin.show_job(conn, 10_000) is None

    text = render(views.job_detail(detail, datetime.now(UTC)))
    assert "ConnectionError: upstream refused" in text
    assert 'File "app.py", line 3, in fetch' in text  # the whole traceback, not a summary
    assert '"url": "https://x.test"' in text


async def test_show_cuts_what_would_flood_the_terminal(conn: asyncpg.Connection) -> None:
    big = "x" * 100_000
    job = await make(conn, "huge", "dead", carry=f'{{"blob": "{big}"}}', key="k" * 5000)
    detail = await admin.show_job(conn, job)
    assert detail is not None and detail.job.carry == {"blob": big}  # the API keeps it all
    text = render(views.job_detail(detail, datetime.now(UTC)))
    assert len(text) < 20_000
    whole = len(formatting.to_json({"blob": big}))
    assert f"truncated: {whole} characters in all" in text and "--json" in text


def render(renderable: object, width: int = 140) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


# --- retry ----------------------------------------------------------------------------


async def test_retry_sends_dead_and_cancelled_back_to_pending(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    dead = s["fetch_dead"][0]
    [cancel] = await admin.cancel_jobs(conn, s["fetch_due"], operator="op:1")
    assert cancel.done
    before = datetime.now(UTC)
    changes = await admin.retry_jobs(conn, [dead, s["fetch_due"][0]], operator="op:1")
    assert [c.done for c in changes] == [True, True]
    assert changes[0].message == f"job {dead} (fetch): dead -> pending"
    assert changes[1].was == "cancelled"
    job = await venturi.get_job(conn, dead)
    assert job is not None
    assert (job.status, job.failures, job.finished_at, job.result) == ("pending", 0, None, None)
    assert job.visible_at <= datetime.now(UTC) and job.visible_at >= before - timedelta(seconds=5)
    journal = await venturi.get_journal(conn, dead)
    assert events(journal)[-1] == "retried"
    assert (journal[-1].worker, journal[-1].detail) == ("op:1", admin.MANUAL_RETRY)
    # Pending and visible now: the next claim of its kind takes it.
    rows = await claim(conn, db.Claimant("w9:9"), ["fetch"], limit=10, schema=S)
    assert dead in [r["id"] for r in rows]


async def test_retry_refuses_other_states_one_message_each(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    ids = [s["mail_completed"][0], s["mail_claimed"][0], s["mail_due"][0], 999_999]
    changes = await admin.retry_jobs(conn, ids)
    assert not any(c.done for c in changes)
    by_id = {c.id: c.message for c in changes}
    assert by_id[s["mail_completed"][0]].endswith(
        "is completed: only dead or cancelled jobs can be retried"
    )
    assert "is claimed" in by_id[s["mail_claimed"][0]]
    assert "is pending" in by_id[s["mail_due"][0]]
    assert by_id[999_999] == "job 999999 does not exist"
    # Nothing moved, nothing journaled.
    assert [j.status for j in await admin.list_jobs(conn, kind="mail", limit=100)].count(
        "pending"
    ) == 4
    with pytest.raises(ConfigError, match="at least one job id"):
        await admin.retry_jobs(conn, [])


async def test_retry_respects_key_uniqueness(conn: asyncpg.Connection) -> None:
    first = await make(conn, "sync", "dead", key="acct-1")
    second = await make(conn, "sync", "dead", key="acct-1")
    # Both dead with one key: only one may be unfinished again.
    changes = await admin.retry_jobs(conn, [first, second])
    assert [c.done for c in changes] == [True, False]
    assert f"unfinished job {first} holds its key" in changes[1].message
    # And a fresh job holding the key blocks a retry too.
    third = await make(conn, "sync2", "dead", key="k")
    holder = await make(conn, "sync2", "pending", key="k")
    [change] = await admin.retry_jobs(conn, [third])
    assert not change.done and f"unfinished job {holder} holds its key" in change.message


# --- cancel ---------------------------------------------------------------------------


async def test_cancel_pending_now_and_claimed_by_request(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    due, claimed, done = s["mail_due"][0], s["mail_claimed"][0], s["mail_completed"][0]
    changes = await admin.cancel_jobs(conn, [claimed, due, done, due], operator="op:2")
    assert [c.id for c in changes] == sorted({claimed, due, done})
    by_id = {c.id: c for c in changes}
    assert by_id[due].done and by_id[due].now == "cancelled"
    assert by_id[claimed].done and by_id[claimed].now == "claimed"
    assert "claimed by w1:1; cancel requested" in by_id[claimed].message
    assert not by_id[done].done and "only pending or claimed" in by_id[done].message

    job = await venturi.get_job(conn, due)
    assert job is not None and job.status == "cancelled" and job.finished_at is not None
    journal = await venturi.get_journal(conn, due)
    assert events(journal) == ["enqueued", "cancelled"]
    assert (journal[-1].worker, journal[-1].detail) == ("op:2", admin.CANCEL_DETAIL)

    running = await venturi.get_job(conn, claimed)
    assert running is not None
    assert running.status == "claimed" and running.cancel_requested_at is not None
    asked = running.cancel_requested_at
    # Asking again keeps the first request's time.
    await admin.cancel_jobs(conn, [claimed])
    again = await venturi.get_job(conn, claimed)
    assert again is not None and again.cancel_requested_at == asked
    # A cancelled job is no longer claimable.
    rows = await claim(conn, db.Claimant("w9:9"), ["mail"], limit=10, schema=S)
    assert due not in [r["id"] for r in rows]


async def test_cancel_frees_the_key_and_retry_clears_the_request(
    conn: asyncpg.Connection,
) -> None:
    job = await make(conn, "keyed", "pending", key="order-7")
    [c] = await admin.cancel_jobs(conn, [job])
    assert c.done
    # The key is free again.
    [fresh] = await db.enqueue.job_insert_many(
        conn, schema=S, specs=[JobSpec("keyed", "{}", 1, None, None, "order-7", 25)]
    )
    assert fresh != job
    claimed = await make(conn, "other", "claimed")
    await admin.cancel_jobs(conn, [claimed])
    info = await venturi.get_job(conn, claimed)
    assert info is not None and info.cancel_requested_at is not None


# --- stats and top --------------------------------------------------------------------


async def test_stats_per_kind(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    # An operator's retry is journaled as retried but is not a failure.
    await admin.retry_jobs(conn, s["fetch_dead"])
    result = await admin.stats(conn)
    assert (result.completed_window_seconds, result.failures_window_seconds) == (60.0, 3600.0)
    by_kind = {k.kind: k for k in result.kinds}
    mail, fetch = by_kind["mail"], by_kind["fetch"]
    assert (mail.due, mail.scheduled, mail.claimed, mail.completed, mail.dead) == (3, 1, 1, 2, 0)
    assert (mail.completed_recent, mail.failures_recent, mail.expired) == (2, 0, 0)
    # fetch: the retried dead job is due again next to the one pending.
    assert (fetch.due, fetch.scheduled, fetch.claimed, fetch.completed, fetch.dead) == (
        2,
        1,
        1,
        1,
        0,
    )
    assert fetch.failures_recent == 2  # the dead one's failure and the failed one's
    assert mail.oldest_due_seconds is not None and 0 <= mail.oldest_due_seconds < 60
    cancelled = await admin.cancel_jobs(conn, s["mail_due"][:1])
    assert cancelled[0].done
    after = {k.kind: k for k in (await admin.stats(conn)).kinds}
    assert (after["mail"].due, after["mail"].cancelled) == (2, 1)
    empty_conn_stats = await admin.stats(conn, completed_window=0.000001)
    assert all(k.completed_recent == 0 for k in empty_conn_stats.kinds)


async def test_top_frame_renders_from_a_seeded_database(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    # One claim whose lease has run out: top flags it on its kind and on its worker.
    stale = await make(conn, "sweep", "claimed", worker="w3:3", lease=0.05)

    async def expired() -> bool:
        frame = await admin.top_frame(conn)
        return any(k.kind == "sweep" and k.expired == 1 for k in frame.kinds)

    await wait_for(expired)
    frame = await admin.top_frame(conn)
    kinds = {k.kind: k for k in frame.kinds}
    assert (kinds["mail"].due, kinds["mail"].claimed, kinds["mail"].completed_recent) == (3, 1, 2)
    assert (kinds["fetch"].dead, kinds["fetch"].failures_recent) == (1, 2)
    # Claims under no registered worker: shown by their holders' names, as unregistered.
    assert {w.name: w.claims for w in frame.workers} == {"w1:1": 1, "w2:2": 1, "w3:3": 1}
    assert {w.state for w in frame.workers} == {"unregistered"}

    text = render(views.top(frame))
    lines = text.splitlines()
    assert lines[0].startswith("venturi top")
    header = next(line for line in lines if line.split()[:2] == ["kind", "pending"])
    assert header.split() == [
        "kind",
        "pending",
        "scheduled",
        "waiting",
        "claimed",
        "done/s",
        "failed/1h",
        "dead",
        "oldest",
        "due",
        "note",
    ]
    mail = next(line for line in lines if line.startswith("mail "))
    # 3 due, 1 scheduled, none waiting, 1 claimed, 2 completions over the 10 s window =
    # 0.2/s, no failure.
    assert mail.split()[:8] == ["mail", "3", "1", "0", "1", "0.2", "0", "0"]
    fetch = next(line for line in lines if line.startswith("fetch "))
    assert fetch.split()[:8] == ["fetch", "1", "1", "0", "1", "0.1", "2", "1"]
    assert "1 (1 expired)" in next(line for line in lines if line.startswith("sweep "))
    w3 = next(line for line in lines if line.startswith("w3:3"))
    assert "1 (1 expired)" in w3 and "sweep" in w3
    assert stale and s


async def test_top_frame_of_an_empty_database(conn: asyncpg.Connection) -> None:
    text = render(views.top(await admin.top_frame(conn)))
    assert "no jobs" in text and "no worker live or gone" in text


async def test_top_live_redraws_and_survives_a_database_error(
    dsn: str, conn: asyncpg.Connection
) -> None:
    await seed(conn)
    reads = 0

    async def read(c: asyncpg.Connection) -> admin.TopFrame:
        nonlocal reads
        reads += 1
        if reads == 2:
            raise OSError("connection reset by peer")
        return await admin.top_frame(c)

    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None)
    await ops._top_live(dsn, S, 0.01, read, console=console, frames=3)
    assert reads == 3  # the failed read did not end the view; it reconnected
    text = out.getvalue()
    assert "mail " in text  # a non-terminal console shows the last frame


# --- purge ----------------------------------------------------------------------------


async def test_purge_deletes_old_finished_jobs_in_batches(conn: asyncpg.Connection) -> None:
    s = await seed(conn)
    more = [await make(conn, "bulk", "completed") for _ in range(5)]
    dead = s["fetch_dead"][0]
    # Nothing finished an hour ago.
    assert await admin.purge_count(conn, status="completed", older_than=3600) == 0
    assert await admin.purge(conn, status="completed", older_than=3600) == 0
    assert await admin.purge_count(conn, status="completed", older_than=0) == 8
    assert await admin.purge(conn, status="completed", older_than=0, kind="bulk", batch=2) == 5
    assert all([await venturi.get_job(conn, i) is None for i in more])
    assert await admin.purge(conn, status="completed", older_than=0, batch=2) == 3
    remaining = await admin.list_jobs(conn, limit=100)
    assert "completed" not in {r.status for r in remaining}
    # The dead job and its journal go with status dead.
    assert await db.journal.journal_get(conn, schema=S, job_id=dead)
    assert await admin.purge(conn, status="dead", older_than=0) == 1
    assert await venturi.get_job(conn, dead) is None
    assert await db.journal.journal_get(conn, schema=S, job_id=dead) == []  # cascaded
    # Unfinished jobs are never purged.
    with pytest.raises(ConfigError, match="status must be one of completed, dead, cancelled"):
        await admin.purge(conn, status="pending", older_than=0)
    statuses = {r.status for r in await admin.list_jobs(conn, limit=100)}
    assert statuses == {"pending", "claimed"}


# --- schema ---------------------------------------------------------------------------


async def test_upgrade_from_version_1_keeps_jobs_and_adds_the_column(empty_dsn: str) -> None:
    conn = await asyncpg.connect(empty_dsn)
    try:
        first = sql.migrations()[0]
        assert first.version == 1
        await conn.execute(first.sql)
        # A job enqueued at version 1, as a release of that version wrote it (this
        # release's insert writes columns of later migrations); the claim runs after the
        # upgrade.
        job = await conn.fetchval(
            "INSERT INTO venturi.jobs (kind, carry) VALUES ('old', '{}') RETURNING id"
        )
        with pytest.raises(venturi.SchemaError, match="at version 1"):
            await db.schema.schema_version(conn, schema=S)
        assert await db.schema.apply_schema(conn, schema=S) == [
            m.version for m in sql.migrations()[1:]
        ]
        [claimed] = await claim(conn, W1, ["old"], schema=S)
        assert claimed["id"] == job
        [change] = await admin.cancel_jobs(conn, [job])
        assert change.done
        info = await venturi.get_job(conn, job)
        assert info is not None and info.cancel_requested_at is not None
    finally:
        await conn.close()


async def test_operator_statements_run_concurrently_with_a_claim(
    pool: asyncpg.Pool,
) -> None:
    # Cancel and claim race for the same pending jobs: every job ends up either claimed
    # (the cancel recorded a request) or cancelled, never both and never lost.
    ids = [await make(pool, "race", "pending") for _ in range(40)]
    claim = db.claims.job_claim(
        pool,
        schema=S,
        claimant=W1,
        kinds=["race"],
        leases=[60.0],
        floor=0,
        limit=40,
    )
    _, changes = await asyncio.gather(claim, admin.cancel_jobs(pool, ids))
    assert all(c.done for c in changes)
    rows = {r.id: r for r in await admin.list_jobs(pool, kind="race", limit=100)}
    for c in changes:
        row = rows[c.id]
        if c.now == "cancelled":
            assert row.status == "cancelled"
        else:
            assert row.status == "claimed" and row.cancel_requested_at is not None


async def _plan_indexes(conn: asyncpg.Connection, name: str, *args: object) -> set[str]:
    # Plain EXPLAIN (no ANALYZE): plans the statement with real parameters, runs nothing.
    rows = await conn.fetch("EXPLAIN " + sql.statement(name).rstrip().rstrip(";"), *args)
    plan = "\n".join(r[0] for r in rows)
    return {
        word for word in plan.replace("(", " ").replace(")", " ").split() if word.endswith("_idx")
    }


async def test_operator_statements_use_their_indexes(conn: asyncpg.Connection) -> None:
    # 10,000 jobs through the runtime's statements: 9,000 completed, 300 dead, 500
    # claimed, 200 pending, over five kinds.
    specs = [JobSpec(f"k{i % 5}", "{}", i % 3, None, None, None, 25) for i in range(10_000)]
    await db.enqueue.job_insert_many(conn, schema=S, specs=specs)
    kinds = [f"k{i}" for i in range(5)]
    rows = (
        await db.claims.job_claim(
            conn,
            schema=S,
            claimant=W1,
            kinds=kinds,
            leases=[3600.0] * 5,
            floor=0,
            limit=9_800,
        )
    ).claimed
    done = rows[:9_000]
    await db.settle.job_complete_many_if_owned(
        conn,
        schema=S,
        claimant=W1,
        ids=[r["id"] for r in done],
        attempts=[r["attempt"] for r in done],
        results=[None] * 9_000,
    )
    for r in rows[9_000:9_300]:
        await db.settle.job_fail_if_owned(
            conn,
            schema=S,
            claimant=W1,
            job_id=r["id"],
            attempt=r["attempt"],
            event="failed",
            error="x",
            carry=None,
            delay=0.0,
            force_dead=True,
        )
    # Vacuumed, as autovacuum and the Vacuum task keep the queue. Unvacuumed, the claim
    # index still holds the 9,800 claimed rows' dead entries and every pending row needs
    # a visit of the table, and the planner reads the 10,000 rows of the table instead
    # (before migration 18 it took the narrower jobs_next_visible_idx even so).
    await conn.execute(sql.statement("maintenance/vacuum_analyze"))

    purge = await _plan_indexes(conn, "job_purge_batch", "completed", 3600.0, None, 1000)
    assert "jobs_finished_idx" in purge
    top = await _plan_indexes(conn, "job_top", admin.MANUAL_RETRY, 10.0, 3600.0)
    # Pending and claimed rows through their partial indexes (pending ones by the claim's,
    # which includes kind and visible_at since migration 18), dead ones through the
    # finished index: a frame does not read the 9,000 completed rows' heap to count dead.
    assert {"jobs_claim_idx", "jobs_stale_idx", "jobs_finished_idx"} <= top
    assert "jobs_stale_idx" in await _plan_indexes(conn, "worker_list", 30.0, None)
