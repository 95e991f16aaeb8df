"""Security: no SQL text is ever built from a value; the DSN's password never reaches a
log or an error; the CLI does not echo a carry it cannot decode in full.

Statically, the library's source is read (every statement comes from a template that only
templates identifiers); dynamically, values that would break a query built by string
formatting (quotes, semicolons, comment markers, dollar quotes, placeholders) go through
every path as data and come back unchanged.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import re
import urllib.parse
from pathlib import Path
from typing import Any

import asyncpg
import jinja2
import msgspec
import pytest
from jinja2 import meta

import venturi
from tests.support import ROOT, running, venturi_cli_async, wait_status, wait_until
from tests.support import sql as test_sql
from venturi import Backoff, Context, db, sql
from venturi.runtime.worker import Worker

LIBRARY = ROOT / "venturi"
TEMPLATES = LIBRARY / "sql_templates"
SECRET = "Pa55-w0rd-never-shown"

# --- no SQL text built from a value: the source ------------------------------------------


def test_templates_fill_in_only_identifiers() -> None:
    """Templates see no value at all: runtime ones only the (validated, quoted) schema name
    and its two channels (derived from it), the database ones only (validated, quoted)
    database names."""
    env = jinja2.Environment()
    allowed = {"database": {"database", "template"}}
    for path in sorted(TEMPLATES.rglob("*.sql.j2")):
        folder = path.parent.name
        used = meta.find_undeclared_variables(env.parse(path.read_text()))
        assert used <= allowed.get(folder, {"s", "channel", "finished_channel"}), (path, used)
    # And the rendering refuses a name that would need more than quoting.
    with pytest.raises(venturi.ConfigError):
        sql.database_statement("database_create", 'x"; DROP DATABASE postgres; --')


QUERY_METHODS = {
    "execute",
    "executemany",
    "fetch",
    "fetchrow",
    "fetchval",
    "prepare",
    "cursor",
    "copy_from_query",
}
SQL_FACTORIES = {"statement", "fresh_schema", "database_statement"}
SQLISH = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\S+\s+SET|"
    r"CREATE\s+(TABLE|INDEX|SCHEMA|DATABASE)|DROP\s+(TABLE|SCHEMA|DATABASE))\b",
    re.S,
)


def _from_templates(node: ast.expr) -> bool:
    """``sql.statement(...)``, ``sql.fresh_schema(...)``, ``sql.database_statement(...)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "sql"
        and node.func.attr in SQL_FACTORIES
    )


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _query_text_problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    problems = []
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]

    def around(node: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions around ``node``, outermost first (ast.walk is breadth-first)."""
        return [f for f in funcs if any(n is node for n in ast.walk(f))]

    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in QUERY_METHODS
            and node.args
        ):
            continue
        arg = node.args[0]
        where = f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}"
        if _from_templates(arg):
            continue
        if isinstance(arg, ast.Attribute) and arg.attr == "sql":
            continue  # migration.sql, rendered by sql.migrations()
        if isinstance(arg, ast.Starred):
            # A pass-through wrapper (fetch(self, *args) -> conn.fetch(*args)).
            inner = around(node)
            if inner and inner[-1].args.vararg:
                continue
        if isinstance(arg, ast.Name):
            # Every assignment to that name in the outermost function around the call
            # (so a closure sees its enclosing function's variable).
            outer = around(node)
            scope: ast.AST = outer[0] if outer else tree
            values = [
                a.value
                for a in ast.walk(scope)
                if isinstance(a, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == arg.id for t in a.targets)
            ]
            if values and all(_from_templates(v) for v in values):
                continue
        problems.append(where)
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if SQLISH.search(node.value):
                problems.append(f"{path.name}:{node.lineno}: SQL text {node.value[:60]!r}")
        if isinstance(node, ast.JoinedStr) and SQLISH.search(ast.unparse(node)):
            problems.append(f"{path.name}:{node.lineno}: SQL built by an f-string")
    return problems


def test_every_query_runs_a_rendered_template() -> None:
    """Every execute/fetch* call in the library runs text from the templates (directly or
    through a variable assigned only from them); no SQL text appears in the source."""
    problems = [p for f in sorted(LIBRARY.rglob("*.py")) for p in _query_text_problems(f)]
    assert problems == []


def test_the_source_check_catches_a_query_built_from_a_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "async def f(conn, kind):\n"
        "    await conn.fetch(f'SELECT * FROM jobs WHERE kind = {kind}')\n"
        "    text = 'DELETE FROM jobs WHERE id = ' + kind\n"
        "    await conn.execute(text)\n"
        "    await conn.fetchval('SELECT 1 FROM x %s' % kind)\n"
    )
    assert len(_query_text_problems(bad)) >= 4


# --- no SQL text built from a value: values go through as data ----------------------------

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
