"""benchmarks/ keeps the package's house rules (tests/unit/test_layers.py): no module over
500 lines, no function body over 80, no import circle; and nothing outside it imports it.
Read off the source with ``ast``: nothing is imported, so the peers need not be installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(BENCHMARKS.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(path: Path, name: str, mods: dict[str, Path]) -> set[str]:
    """The benchmarks modules ``path`` imports, at any depth (function-level included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(mods)
            out |= subs or ({node.module} & set(mods))
    out.discard(name)
    return out


def _in_a_circle(graph: dict[str, set[str]]) -> list[str]:
    """The modules from which an import path leads back to themselves."""

    def reaches(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        return seen

    return sorted(m for m in graph if m in reaches(m))


def test_no_benchmark_module_or_function_is_over_the_limit() -> None:
    mods = _modules()
    assert len(mods) > 20  # the walk found benchmarks/
    long = {}
    for path in mods.values():
        text = path.read_text()
        rel = path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if body > MAX_FUNCTION_LINES:
                    long[f"{rel}:{node.lineno} {node.name}"] = body
    assert long == {}


def test_benchmarks_have_no_import_circle() -> None:
    mods = _modules()
    graph = {name: _imports(path, name, mods) for name, path in mods.items()}
    assert _in_a_circle(graph) == []
    # The check sees one.
    assert _in_a_circle({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == ["a", "b"]


def test_nothing_outside_benchmarks_imports_it() -> None:
    found = []
    for top in ("venturi", "tests", "examples", "docs"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
