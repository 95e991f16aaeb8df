"""The SQL can carry no value into a statement's text: templates fill in identifiers only,
and every query runs a rendered template (a source check, with a check that it catches a
query built from a value)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2
import pytest
from jinja2 import meta

import venturi
from tests.support import ROOT
from venturi import sql

LIBRARY = ROOT / "venturi"


TEMPLATES = LIBRARY / "sql_templates"

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


# --- no SQL text built from a value: values go through as data ----------------------------


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
