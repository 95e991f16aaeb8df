"""The package's layers, read off its source with ``ast`` (nothing is imported):

- the runtime (the worker, its loops) never imports the command line, the web dashboard
  or the terminal views, so a worker process carries none of them and they can change
  without touching it;
- only the database layer (``venturi/db/``) executes SQL on a connection, so every
  statement has one home, a second driver has one seam to implement, and a reader finds
  all the database work in one place;
- no import circles among the modules' top-level imports (a circle makes the import order
  matter and the parts impossible to read one at a time).

What does not hold yet is listed below by name, each list to be emptied as the work that
fixes it lands; an entry that no longer applies fails too, so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "venturi"

# The runtime: the worker today, venturi/runtime/ once the worker is split into it; the
# in-process Pool (supervisor.py) until it moves there.
RUNTIME = ("venturi/worker.py", "venturi/supervisor.py", "venturi/runtime/")
NOT_FOR_THE_RUNTIME = ("venturi.cli", "venturi.web", "venturi.views")

DB_LAYER = "venturi/db/"
QUERY_METHODS = frozenset(
    {"execute", "executemany", "fetch", "fetchrow", "fetchval", "prepare", "cursor"}
)

# Modules outside venturi/db/ that call a query method on a connection. drain's look-alike
# pools (one shared connection, an observer of activity) forward the worker's statements
# to the connection they wrap; they hold no SQL of their own.
SQL_OUTSIDE_THE_DB_LAYER = frozenset({"venturi/testing/drain.py"})

# Import circles among top-level imports that remain: none.
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


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


def _imported(node: ast.Import | ast.ImportFrom, name: str, path: Path) -> Iterator[str]:
    """The dotted names an import statement of module ``name`` (in file ``path``) names:
    for ``from a import b``, ``a.b`` (b may be a submodule) and ``a``."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
        return
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        parent = package[: len(package) - (node.level - 1)]
        base = ".".join([*parent, *([node.module] if node.module else [])])
    yield base
    yield from (f"{base}.{a.name}" for a in node.names)


def _top_level_imports(body: Iterable[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run (or that a type checker follows) when the module is imported: at
    module level, under ``if`` (``TYPE_CHECKING`` included) and ``try``; not in functions,
    where deferring an import is how a module breaks a circle on purpose."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from _top_level_imports(node.body)
            yield from _top_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level_imports(node.body)
            for handler in node.handlers:
                yield from _top_level_imports(handler.body)
            yield from _top_level_imports(node.orelse)
            yield from _top_level_imports(node.finalbody)


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules its top-level imports name (a ``from a import b``
    counts as importing ``a.b`` when that is a module, else ``a``)."""
    mods = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in _top_level_imports(ast.parse(path.read_text()).body):
            names = list(_imported(node, name, path))
            if isinstance(node, ast.ImportFrom):
                base, members = names[0], names[1:]
                subs = [m for m in members if m in mods]
                deps.update(subs)
                if len(subs) < len(members) and base in mods:
                    deps.add(base)
            else:
                deps.update(n for n in names if n in mods)
        graph[name] = deps - {name}
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


def runtime_imports(root: Path, package: str = PACKAGE) -> list[str]:
    """``file:line: module`` for every import, at any depth, of the CLI, the web dashboard
    or the views in a runtime file; raises if no runtime file exists (a vacuous check)."""
    mods = modules(root, package)
    files = [p for p in mods.values() if _relative(p, root).startswith(RUNTIME)]
    assert files, f"no runtime file under {root}: {RUNTIME}"
    name_of = {p: n for n, p in mods.items()}
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for imported in _imported(node, name_of[path], path):
                    if imported.startswith(tuple(f"{m}." for m in NOT_FOR_THE_RUNTIME)) or (
                        imported in NOT_FOR_THE_RUNTIME
                    ):
                        bad.append(f"{_relative(path, root)}:{node.lineno}: {imported}")
    return sorted(set(bad))


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


def test_the_runtime_never_imports_the_cli_web_or_views() -> None:
    assert runtime_imports(ROOT) == []


def test_only_the_database_layer_executes_sql() -> None:
    found = sql_executors(ROOT)
    assert sorted(set(found) - SQL_OUTSIDE_THE_DB_LAYER) == [], {
        f: calls for f, calls in found.items() if f not in SQL_OUTSIDE_THE_DB_LAYER
    }
    # An entry that executes no SQL any more leaves the list.
    assert sorted(SQL_OUTSIDE_THE_DB_LAYER - set(found)) == []


def test_no_import_circles() -> None:
    found = circles(import_graph(ROOT))
    assert sorted(map(sorted, found - KNOWN_CIRCLES)) == []
    # A circle that was broken leaves the list.
    assert sorted(map(sorted, KNOWN_CIRCLES - found)) == []


# --- the checks catch what they are for ---------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checks_catch_a_violation(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "venturi/__init__.py": "",
            "venturi/worker.py": "def f():\n    from venturi.cli import app\n",
            "venturi/runtime/__init__.py": "",
            "venturi/runtime/loop.py": "from ..views import table\nfrom venturi import web\n",
            "venturi/cli/__init__.py": "from venturi.cli import app\n",
            "venturi/cli/app.py": "from venturi import views\n",
            "venturi/views.py": "import venturi.cli.app\n",
            "venturi/web.py": "",
            "venturi/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from venturi.b import B\n",
            "venturi/b.py": "from venturi import a\n\nasync def f(conn):\n"
            "    await conn.fetchval('x')\n    await conn.copy_records_to_table('t')\n",
            "venturi/c.py": "def f():\n    from venturi import d\n",
            "venturi/d.py": "from venturi import c\n",
            "venturi/db/__init__.py": "async def f(conn):\n    await conn.execute('x')\n",
        },
    )
    assert runtime_imports(root) == [
        "venturi/runtime/loop.py:1: venturi.views",
        "venturi/runtime/loop.py:1: venturi.views.table",
        "venturi/runtime/loop.py:2: venturi.web",
        "venturi/worker.py:2: venturi.cli",
        "venturi/worker.py:2: venturi.cli.app",
    ]
    assert {f: len(calls) for f, calls in sql_executors(root).items()} == {"venturi/b.py": 2}
    # The TYPE_CHECKING import closes a circle; the function-level one does not.
    assert circles(import_graph(root)) == {
        frozenset({"venturi.a", "venturi.b"}),
        frozenset({"venturi.cli.app", "venturi.views"}),
    }
