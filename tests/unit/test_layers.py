"""The package's layers and its size rules, read off its source with ``ast`` (nothing is
imported). Every import statement counts, at any depth: at module level, under ``if``
(``TYPE_CHECKING`` included) and ``try``, and inside functions, since a deferred import
still ties two modules together.

The layers (``LAYER_RULES``), each for a reason:

- the runtime (``venturi/runtime/``) never imports the operator's API, the dashboard or
  the command line: a worker process carries none of them, and they can change without
  touching it; nor the maintenance tasks, which it runs as it is given them (they import
  the runtime's runner, ``venturi.runtime.maintainer``);
- the maintenance tasks (``venturi/maintenance/``) never import the operator's API, the
  dashboard or the command line either: a worker runs them (what they share with an
  operator's call is below both, in ``venturi.db``, ``venturi.kind_health`` and
  ``venturi.status``);
- the operator's API (``venturi/admin/``) never imports the runtime or the maintenance
  tasks: what an operator can do does not depend on a worker running;
- the database layer (``venturi/db/``) imports nothing above it: only itself and the
  bottom modules (``venturi.sql``, ``errors``, ``backoff``, ``status``);
- the command line and the dashboard reach the database through ``venturi.admin``, never
  ``venturi.db`` (except ``venturi.db.errors``, the errors they catch and print);
- only the database layer executes SQL on a connection, so every statement has one home.

The house rules (``MAX_MODULE_LINES``, ``MAX_FUNCTION_LINES``): no module over 500 lines,
no function body over 80, no private name (``_x``) imported from another module, and no
import circle: between modules, nor between folders (``folder_graph``: a subpackage such
as ``venturi/runtime/`` counts as one, a module directly under ``venturi/`` as itself), so
that two folders never lean on each other through different modules.

These read the source; ``tests/unit/test_worker_imports.py`` checks the same rule per
process, on what a worker actually loads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "venturi"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


@dataclass(frozen=True)
class Rule:
    """The modules under ``under`` (a path relative to the root) import none of
    ``never`` (dotted prefixes), unless the import is one of ``except_for``; with
    ``only`` given, they import nothing of the package outside those prefixes."""

    under: str
    why: str
    never: tuple[str, ...] = ()
    except_for: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None


LAYER_RULES = (
    Rule(
        "venturi/runtime/",
        "a worker carries no operator API, dashboard or CLI",
        never=("venturi.admin", "venturi.web", "venturi.cli"),
    ),
    Rule(
        "venturi/runtime/",
        "the runtime runs the maintenance tasks it is given, it imports none",
        never=("venturi.maintenance",),
    ),
    Rule(
        "venturi/maintenance/",
        "a worker runs the maintenance tasks: no operator API, dashboard or CLI",
        never=("venturi.admin", "venturi.web", "venturi.cli"),
    ),
    Rule(
        "venturi/admin/",
        "an operator's call needs no worker",
        never=("venturi.runtime", "venturi.maintenance"),
    ),
    Rule(
        "venturi/db/",
        "the database layer sits below everything but the bottom modules",
        only=("venturi.db", "venturi.sql", "venturi.errors", "venturi.backoff", "venturi.status"),
    ),
    Rule(
        "venturi/cli/",
        "the CLI goes through venturi.admin",
        never=("venturi.db",),
        except_for=("venturi.db.errors",),
    ),
    Rule(
        "venturi/web/",
        "the dashboard goes through venturi.admin",
        never=("venturi.db",),
        except_for=("venturi.db.errors",),
    ),
)

DB_LAYER = "venturi/db/"
QUERY_METHODS = frozenset(
    {"execute", "executemany", "fetch", "fetchrow", "fetchval", "prepare", "cursor"}
)

# Modules outside venturi/db/ that call a query method on a connection. drain's look-alike
# pools (one shared connection, an observer of activity) forward the worker's statements
# to the connection they wrap; they hold no SQL of their own.
SQL_OUTSIDE_THE_DB_LAYER = frozenset({"venturi/testing/drain.py"})


def modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in prefixes)


@dataclass(frozen=True)
class Import:
    """One module of the package that an import statement of ``source`` reaches."""

    source: str
    file: str
    line: int
    target: str
    # The names a ``from`` import takes that are not modules themselves.
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.target}"


def _base(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module a ``from`` import of module ``name`` (file ``path``) reads from."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    parent = package[: len(package) - (node.level - 1)]
    return ".".join([*parent, *([node.module] if node.module else [])])


def imports(root: Path, package: str = PACKAGE) -> list[Import]:
    """Every import, at any depth, of every module, resolved to the package's modules:
    ``import a.b`` reaches ``a.b``; ``from a import b`` reaches ``a.b`` when that is a
    module, else ``a``."""
    mods = modules(root, package)
    found = []
    for name, path in mods.items():
        rel = _relative(path, root)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods:
                        found.append(Import(name, rel, node.lineno, alias.name))
            elif isinstance(node, ast.ImportFrom):
                base = _base(node, name, path)
                members = [a.name for a in node.names]
                subs = [m for m in members if f"{base}.{m}" in mods]
                found += [Import(name, rel, node.lineno, f"{base}.{m}") for m in subs]
                rest = tuple(m for m in members if m not in subs)
                if rest and base in mods:
                    found.append(Import(name, rel, node.lineno, base, rest))
    return found


def layer_violations(root: Path, rules: tuple[Rule, ...] = LAYER_RULES) -> list[str]:
    """``file:line: module (why)`` for each import that breaks a rule."""
    bad = []
    for imp in imports(root):
        for rule in rules:
            if not imp.file.startswith(rule.under) or _within(imp.target, rule.except_for):
                continue
            if imp.target == PACKAGE:  # ``from venturi import x`` of a name, not a module
                continue
            if _within(imp.target, rule.never) or (
                rule.only is not None and not _within(imp.target, rule.only)
            ):
                bad.append(f"{imp} ({rule.why})")
    return sorted(set(bad))


def missing_paths(
    root: Path,
    rules: tuple[Rule, ...] = LAYER_RULES,
    listed: frozenset[str] = SQL_OUTSIDE_THE_DB_LAYER,
) -> list[str]:
    """Every path and module a rule or a list here names that does not exist."""
    mods = modules(root)
    named = [r.under for r in rules] + sorted(listed)
    gone = [p for p in named if not (root / p).exists()]
    prefixes = [p for r in rules for p in (*r.never, *r.except_for, *(r.only or ()))]
    gone += [p for p in prefixes if p not in mods]
    return gone


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at any depth)."""
    graph: dict[str, set[str]] = {name: set() for name in modules(root, package)}
    for imp in imports(root, package):
        if imp.target != imp.source:
            graph[imp.source].add(imp.target)
    return graph


def folder(module: str) -> str:
    """The folder ``module`` counts in: its subpackage of the package (``venturi.runtime``
    for ``venturi.runtime.loop``); a module directly under the package is its own."""
    return ".".join(module.split(".")[:2])


def folder_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Folder -> the other folders its modules import (at any depth)."""
    graph: dict[str, set[str]] = {}
    for source, targets in import_graph(root, package).items():
        here = folder(source)
        graph.setdefault(here, set()).update(folder(t) for t in targets if folder(t) != here)
    return graph


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def private_imports(root: Path) -> list[str]:
    """``file:line: module.name`` for each private name (``_x``, not a dunder) a module
    imports from another module of the package."""
    bad = []
    for imp in imports(root):
        last = imp.target.rsplit(".", 1)[-1]
        taken = [*imp.names] if imp.names else [last]
        for name in taken:
            if name.startswith("_") and not name.startswith("__") and imp.target != imp.source:
                shown = imp.target if not imp.names else f"{imp.target}.{name}"
                bad.append(f"{imp.file}:{imp.line}: {shown}")
    return sorted(set(bad))


def long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """File -> lines, for each module over ``limit`` lines."""
    lengths = {_relative(p, root): len(p.read_text().splitlines()) for p in modules(root).values()}
    return {f: n for f, n in lengths.items() if n > limit}


def function_lengths(root: Path) -> Iterator[tuple[str, int]]:
    """(``file:line name``, lines of its body) for every function and method: from the
    first statement of the body (its docstring, if any) to the last line."""
    for path in modules(root).values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno or node.lineno
                where = f"{_relative(path, root)}:{node.lineno} {node.name}"
                yield where, end - node.body[0].lineno + 1


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    return {f: n for f, n in function_lengths(root) if n > limit}


def sql_executors(root: Path, package: str = PACKAGE) -> dict[str, list[str]]:
    """File -> ``line: call`` for each call of a query method (``execute``, ``fetch*``,
    ``copy_*``...) outside ``venturi/db/``."""
    found: dict[str, list[str]] = {}
    for path in modules(root, package).values():
        rel = _relative(path, root)
        if rel.startswith(DB_LAYER):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (node.func.attr in QUERY_METHODS or node.func.attr.startswith("copy_"))
            ):
                found.setdefault(rel, []).append(f"{node.lineno}: {ast.unparse(node)[:70]}")
    return found


# --- the checks on venturi ------------------------------------------------------------------


def test_every_path_the_rules_name_exists() -> None:
    assert missing_paths(ROOT) == []


def test_the_layers_point_one_way() -> None:
    assert layer_violations(ROOT) == []


def test_only_the_database_layer_executes_sql() -> None:
    found = sql_executors(ROOT)
    assert sorted(set(found) - SQL_OUTSIDE_THE_DB_LAYER) == [], {
        f: calls for f, calls in found.items() if f not in SQL_OUTSIDE_THE_DB_LAYER
    }
    # An entry that executes no SQL any more leaves the list.
    assert sorted(SQL_OUTSIDE_THE_DB_LAYER - set(found)) == []


def test_no_import_circles() -> None:
    assert sorted(map(sorted, circles(import_graph(ROOT)))) == []


def test_no_import_circles_between_folders() -> None:
    graph = folder_graph(ROOT)
    assert {"venturi.runtime", "venturi.maintenance", "venturi.admin"} <= set(graph)
    assert sorted(map(sorted, circles(graph))) == []


def test_no_private_name_is_imported_from_another_module() -> None:
    assert private_imports(ROOT) == []


def test_no_module_is_over_the_limit() -> None:
    assert long_modules(ROOT) == {}


def test_no_function_is_over_the_limit() -> None:
    lengths = dict(function_lengths(ROOT))
    assert len(lengths) > 100  # the walk found the package's functions
    assert long_functions(ROOT) == {}


# --- the checks catch what they are for ---------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_layer_check_catches_each_rule(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "venturi/__init__.py": "",
            "venturi/errors.py": "",
            "venturi/tasks.py": "",
            "venturi/runtime/__init__.py": "",
            "venturi/runtime/loop.py": "def f():\n    from venturi.admin import jobs\n",
            "venturi/admin/__init__.py": "",
            "venturi/admin/jobs.py": "from ..maintenance import cron\nfrom venturi import db\n",
            "venturi/maintenance/__init__.py": "",
            "venturi/maintenance/cron.py": "",
            "venturi/db/__init__.py": "from venturi.errors import X\n",
            "venturi/db/errors.py": "",
            "venturi/db/enqueue.py": "from venturi import tasks\nfrom . import errors\n",
            "venturi/cli/__init__.py": "",
            "venturi/cli/app.py": "from venturi.db.errors import E\nfrom venturi.db import enqueue\n",
            "venturi/web/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    import venturi.db\n",
        },
    )
    rules = (
        Rule("venturi/runtime/", "r", never=("venturi.admin",)),
        Rule("venturi/admin/", "a", never=("venturi.maintenance",)),
        Rule("venturi/db/", "d", only=("venturi.db", "venturi.errors")),
        Rule("venturi/cli/", "c", never=("venturi.db",), except_for=("venturi.db.errors",)),
        Rule("venturi/web/", "w", never=("venturi.db",), except_for=("venturi.db.errors",)),
    )
    assert layer_violations(root, rules) == [
        "venturi/admin/jobs.py:1: venturi.maintenance.cron (a)",
        "venturi/cli/app.py:2: venturi.db.enqueue (c)",
        "venturi/db/enqueue.py:1: venturi.tasks (d)",
        "venturi/runtime/loop.py:2: venturi.admin.jobs (r)",
        "venturi/web/__init__.py:3: venturi.db (w)",
    ]
    gone = (Rule("venturi/gone/", "g", never=("venturi.nothing",)),)
    assert missing_paths(root, gone, frozenset({"venturi/x.py"})) == [
        "venturi/gone/",
        "venturi/x.py",
        "venturi.nothing",
    ]
    assert missing_paths(root, rules, frozenset()) == []


def test_the_house_checks_catch_a_violation(tmp_path: Path) -> None:
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES + 1))
    root = _package(
        tmp_path,
        {
            "venturi/__init__.py": "",
            "venturi/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from venturi.b import B\n",
            "venturi/b.py": "from venturi import a\n\nasync def f(conn):\n"
            "    await conn.fetchval('x')\n    await conn.copy_records_to_table('t')\n",
            # A function-level import closes a circle too.
            "venturi/c.py": "def f():\n    from venturi import d\n",
            "venturi/d.py": "from venturi.c import _helper, __doc__, public\n",
            "venturi/e.py": "def _own(): pass\nx = _own\n" + "\n" * MAX_MODULE_LINES,
            "venturi/f.py": f"def long():\n{long_body}\ndef short():\n    return 1\n",
            "venturi/db/__init__.py": "async def f(conn):\n    await conn.execute('x')\n",
        },
    )
    assert circles(import_graph(root)) == {
        frozenset({"venturi.a", "venturi.b"}),
        frozenset({"venturi.c", "venturi.d"}),
    }
    assert circles(folder_graph(root)) == {
        frozenset({"venturi.a", "venturi.b"}),
        frozenset({"venturi.c", "venturi.d"}),
    }
    assert private_imports(root) == ["venturi/d.py:1: venturi.c._helper"]
    assert long_modules(root) == {"venturi/e.py": MAX_MODULE_LINES + 2}
    assert long_functions(root) == {"venturi/f.py:1 long": MAX_FUNCTION_LINES + 1}
    assert {f: len(calls) for f, calls in sql_executors(root).items()} == {"venturi/b.py": 2}


def test_the_folder_check_catches_a_circle_no_module_closes(tmp_path: Path) -> None:
    # runtime.worker -> maintenance.runner and maintenance.gauges -> runtime.instruments:
    # no module circle, but the two folders lean on each other (as they once did).
    root = _package(
        tmp_path,
        {
            "venturi/__init__.py": "",
            "venturi/status.py": "",
            "venturi/runtime/__init__.py": "",
            "venturi/runtime/worker.py": "from venturi.maintenance import runner\n",
            "venturi/runtime/instruments.py": "from venturi import status\n",
            "venturi/maintenance/__init__.py": "",
            "venturi/maintenance/runner.py": "",
            "venturi/maintenance/gauges.py": "def f():\n    from venturi.runtime import instruments\n",
        },
    )
    assert circles(import_graph(root)) == set()
    assert folder_graph(root)["venturi.runtime"] == {"venturi.maintenance", "venturi.status"}
    assert circles(folder_graph(root)) == {frozenset({"venturi.runtime", "venturi.maintenance"})}
