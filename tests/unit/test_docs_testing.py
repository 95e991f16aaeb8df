"""The examples of docs/testing.md name only what their own imports give: the page called
``venturi.testing.drain`` after a plain ``import venturi``, which raises AttributeError
(``venturi`` does not import its testing package). Each block's imports run in a fresh
interpreter (this process has the pytest plugin's imports), then every dotted name the
block uses on an imported module, or on ``venturi``, is looked up there."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def _chains(tree: ast.AST) -> set[str]:
    """Every ``a.b.c`` the code reads, as text (the longest chain of each)."""
    found: set[str] = set()
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                inner.add(id(value))
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                found.add(".".join([value.id, *reversed(parts)]))
    return found


def test_every_example_names_what_its_imports_give() -> None:
    blocks = _blocks()
    assert len(blocks) >= 2
    for block in blocks:
        tree = ast.parse(block)
        imports = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        imported = {
            (a.asname or a.name).split(".")[0]
            for n in tree.body
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names
        }
        # venturi's own names always: a block must import what it uses of venturi.
        roots = imported | {"venturi"}
        chains = sorted(c for c in _chains(tree) if c.split(".")[0] in roots)
        code = "\n".join([*imports, *(f"{c}" for c in chains)])
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.returncode == 0, (block, out.stderr)
