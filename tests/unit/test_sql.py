"""The SQL rendered from templates: pinned by snapshots, valid against PostgreSQL, and the
claim and recovery statements proven to use their partial indexes."""

from __future__ import annotations

import json
import re
from typing import Any

import asyncpg
import pytest

from tests.support.plans import nodes
from venturi import db, sql
from venturi.errors import ConfigError

# The claimant of the jobs these tests claim and settle through the store.
W1 = db.Claimant("w:1")


@pytest.mark.parametrize("part", sql.PARTS)
def test_render_default_schema_snapshot(part: str, sql_snapshot: Any) -> None:
    assert sql.render("venturi", part) == sql_snapshot


@pytest.mark.parametrize("part", sql.PARTS)
def test_render_custom_schema_snapshot(part: str, sql_snapshot: Any) -> None:
    text = sql.render("billing_jobs", part)
    assert '"venturi"' not in text
    assert text == sql_snapshot


def test_render_is_deterministic() -> None:
    sql.statement.cache_clear()
    first = sql.render("venturi", "all")
    sql.statement.cache_clear()
    assert sql.render("venturi", "all") == first


@pytest.mark.parametrize(
    "bad", ["", "Venturi", "1abc", "a-b", 'x"; DROP TABLE jobs; --', "a b", "x" * 56, None, 3]
)
def test_invalid_schema_name_refused(bad: Any) -> None:
    with pytest.raises(ConfigError, match="schema must be"):
        sql.render(bad)
    with pytest.raises(ConfigError, match="schema must be"):
        sql.statement("job_claim", bad)


def test_unknown_part_refused() -> None:
    with pytest.raises(ConfigError, match="part must be one of"):
        sql.render("venturi", "views")


def test_every_statement_declares_its_parameters_and_uses_only_binds() -> None:
    for name in sql.statement_names():
        text = sql.statement(name)
        declared = sql._params(text)
        used = {int(n) for n in re.findall(r"\$(\d+)", text.split("\n", 1)[1] if text else "")}
        body_used = {
            int(n)
            for line in text.splitlines()
            if not line.startswith("--")
            for n in re.findall(r"\$(\d+)", line)
        }
        assert body_used == set(range(1, len(declared) + 1)), name
        assert used >= body_used
        assert text.lstrip().startswith(f"-- {name}:"), f"{name} lacks its header"


def _index_names(plan: Any) -> set[str]:
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


async def _plan(conn: asyncpg.Connection, name: str, *args: Any) -> Any:
    # Plain EXPLAIN (no ANALYZE): plans the statement with its real parameters, runs nothing.
    plan_text = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) " + sql.statement(name).rstrip().rstrip(";"), *args
    )
    return json.loads(plan_text)


# The statements of the application's calls, which every driver runs (venturi.db.drivers).
DRIVER_STATEMENTS = (
    "job_insert",
    "job_insert_many",
    "job_insert_many_unkeyed",
    "job_get",
    "job_get_with_journal",
    "transaction/savepoint",
    "transaction/savepoint_release",
    "transaction/savepoint_rollback",
)


@pytest.mark.parametrize("style", sql.STYLES)
def test_driver_statements_per_parameter_style_snapshot(style: str, sql_snapshot: Any) -> None:
    text = "\n".join(sql.statement(name, "venturi", style) for name in DRIVER_STATEMENTS)
    if style != "dollar":
        assert not re.search(r"\$\d", text)
    assert text == sql_snapshot


def test_pyformat_names_each_placeholder() -> None:
    text = sql.statement("job_insert", "venturi", "pyformat")
    assert "%(p6)s::text IS NOT NULL" in text and "$6" not in text
    assert sql.bind((1, "a"), "pyformat") == {"p1": 1, "p2": "a"}
    assert sql.bind((1, "a"), "dollar") == (1, "a")
    with pytest.raises(ConfigError, match="style must be one of dollar, pyformat"):
        sql.statement("job_get", "venturi", "qmark")


def test_the_newest_migration_by_name_is_the_newest_rendered() -> None:
    # Every command and worker start checks the database against latest_migration(),
    # read from the file names without rendering a template.
    rendered = [m.version for m in sql.migrations()]
    assert sql.latest_migration() == rendered[-1] == max(rendered)
    assert rendered == sorted(set(rendered))
