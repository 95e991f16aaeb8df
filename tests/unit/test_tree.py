"""The repository's own text: no merge left half-done."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A line git writes around a conflict: "<<<<<<< ours", "=======", ">>>>>>> theirs".
MARKER = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)


def test_no_file_holds_a_merge_conflict_marker() -> None:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0:
        tracked = listed.stdout.split()
    else:  # not a git checkout: the project's own folders
        tracked = [
            str(p.relative_to(ROOT))
            for top in ("venturi", "tests", "docs", "benchmarks", "examples", "snapshots")
            for p in (ROOT / top).rglob("*")
            if "__pycache__" not in p.parts
        ] + ["README.md", "CHANGELOG.md", "pyproject.toml"]
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix in {".png", ".json"} or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if m := MARKER.search(text):
            found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}")
    assert found == []


def test_the_check_sees_a_marker() -> None:
    assert MARKER.search("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> i16\n")
    assert not MARKER.search("a\n======= not a marker\n")
