"""Security: no SQL text is ever built from a value; the DSN's password never reaches a
log or an error; the CLI does not echo a carry it cannot decode in full.

Statically, the library's source is read (every statement comes from a template that only
templates identifiers); dynamically, values that would break a query built by string
formatting (quotes, semicolons, comment markers, dollar quotes, placeholders) go through
every path as data and come back unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from typing import Any

import asyncpg
import msgspec
import pytest

import venturi
from tests.support import ROOT, running, venturi_cli_async, wait_status, wait_until
from tests.support import sql as test_sql
from venturi import Backoff, Context, db, sql
from venturi.runtime.worker import Worker

LIBRARY = ROOT / "venturi"
TEMPLATES = LIBRARY / "sql_templates"
SECRET = "Pa55-w0rd-never-shown"

# --- no SQL text built from a value: the source ------------------------------------------


HOSTILE = [
    "x'); DROP TABLE venturi.jobs; --",
    'a"b\\c; SELECT pg_sleep(10); /* $1 $$ %s {s} */',
    "'; DELETE FROM venturi.jobs WHERE ''='",
    "$$; TRUNCATE venturi.journal; $$",
    "ünï ☃ \t tab; -- comment",
]


class Payload(msgspec.Struct):
    text: str


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_hostile_kind_key_carry_and_reasons_round_trip_as_data(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], hostile: str
) -> None:
    @venturi.task(kind=hostile, backoff=Backoff.fixed(0.01), max_failures=2)
    async def handler(ctx: Context[Any], carry: Payload) -> venturi.Outcome:
        if carry.text.endswith("die"):
            return venturi.dead(carry.text)
        if ctx.job.attempt == 1:
            return venturi.retry(reason=carry.text)
        return venturi.complete({"echo": carry.text, "kind": ctx.job.kind})

    done = await handler.enqueue(conn, Payload(hostile), key=hostile)
    again = await handler.enqueue(conn, Payload("other"), key=hostile)  # de-duplicated
    dies = await handler.enqueue(conn, Payload(hostile + "die"))
    assert again == done
    async with running(Worker(None, dsn, [handler], poll_max=0.05)):
        await wait_status(conn, done, "completed")
        await wait_status(conn, dies, "dead")
    job = await venturi.get_job(conn, done)
    assert job is not None
    assert (job.kind, job.key, job.carry) == (hostile, hostile, {"text": hostile})
    assert job.result == {"echo": hostile, "kind": hostile}
    journal = await venturi.get_journal(conn, done)
    assert [(e.event, e.detail) for e in journal if e.event == "retried"] == [("retried", hostile)]
    dead = await venturi.get_job(conn, dies)
    assert dead is not None and dead.last_error == hostile + "die"
    # The tables are intact and hold exactly these two jobs.
    rows = await db.reads.job_counts(conn, schema=sql.DEFAULT_SCHEMA)
    assert {(r["kind"], r["status"]): r["jobs"] for r in rows} == {
        (hostile, "completed"): 1,
        (hostile, "dead"): 1,
    }
    # And the operator's commands take it as data too.
    listed = await venturi_cli_async("jobs", "list", "--dsn", dsn, "--kind", hostile, "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["id"] for r in json.loads(listed.stdout)) == sorted([done, dies])


# --- the DSN's password ----------------------------------------------------------------------


def _with_password(dsn: str, password: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    user = parts.username or "postgres"
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{urllib.parse.quote(password, safe='')}@{host}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


async def test_password_never_in_the_worker_logs_through_faults(
    dsn: str, conn: asyncpg.Connection, kinds: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The test server trusts every connection, so a DSN with a password works: run a
    worker on it through terminated backends and failures, logging everything."""
    caplog.set_level(logging.DEBUG)

    @venturi.task(kind="sec_log", backoff=Backoff.fixed(0.01), max_failures=2)
    async def handler(ctx: Context[Any], carry: Payload) -> None:
        if carry.text == "fail":
            raise RuntimeError("a handler failure, logged")

    secret_dsn = _with_password(dsn, SECRET)
    worker = Worker(None, secret_dsn, [handler], poll_max=0.05)
    async with running(worker):
        first = await handler.enqueue(conn, Payload("ok"))
        await wait_status(conn, first, "completed")
        assert await conn.fetchval(test_sql.statement("backends_terminate")) >= 1
        await wait_until(lambda: worker.stats["db_errors"] + worker.stats["listen_reconnects"] > 0)
        failing = await handler.enqueue(conn, Payload("fail"))
        await wait_status(conn, failing, "dead")
    assert "listen" in caplog.text.lower() or "database error" in caplog.text
    assert SECRET not in caplog.text
    assert SECRET not in repr(worker)
    # An unreachable server: the error names the DSN without the password.
    with pytest.raises(venturi.ConnectError) as err:
        await Worker(None, _with_password("postgresql://u@127.0.0.1:1/x", SECRET), [handler]).run(
            asyncio.Event()
        )
    assert SECRET not in str(err.value) and "***" in str(err.value)


# --- the CLI and carries it cannot decode ----------------------------------------------------


class Old(msgspec.Struct):
    blob: str


class New(msgspec.Struct):
    blob: int  # the type changed: stored carries no longer decode


async def _undecodable_big_job(dsn: str, conn: asyncpg.Connection) -> int:
    async def old_fn(ctx: Context[Any], carry: Old) -> None:
        return None

    old = venturi.task(kind="sec_big")(old_fn)
    job_id = await old.enqueue(conn, Old("S" * 300_000))
    venturi.tasks.unregister("sec_big")

    async def new_fn(ctx: Context[Any], carry: New) -> None:
        return None

    new = venturi.task(kind="sec_big")(new_fn)
    async with running(Worker(None, dsn, [new], poll_max=0.05)):
        await wait_status(conn, job_id, "dead")
    return job_id


async def test_undecodable_carry_is_not_echoed_by_the_worker(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    job_id = await _undecodable_big_job(dsn, conn)
    job = await venturi.get_job(conn, job_id)
    assert job is not None and "no longer decodes" in (job.last_error or "")
    assert len(job.last_error or "") < 1000 and "SSSSSSSS" not in (job.last_error or "")


async def test_jobs_show_truncates_a_carry_it_cannot_decode(
    dsn: str, conn: asyncpg.Connection, kinds: list[str]
) -> None:
    job_id = await _undecodable_big_job(dsn, conn)
    out = await venturi_cli_async("jobs", "show", str(job_id), "--dsn", dsn)
    assert out.returncode == 0, out.stderr
    assert "no longer decodes" in out.stdout
    assert len(out.stdout) < 20_000 and "truncated" in out.stdout
