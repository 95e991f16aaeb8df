"""The side-by-side benchmark of venturi, procrastinate and pgqueuer (issue 4).

Run ``python -m benchmarks.compare --quick`` from the repository root; see README.md.
Nothing here is part of the test suite.
"""

import json
from pathlib import Path
from typing import Any


def save_run(path: str, result: Any, text: str) -> None:
    """A run's figures as JSON at ``path`` and its printed summary beside it (``.txt``)."""
    Path(path).write_text(json.dumps(result, indent=1) + "\n")
    Path(path).with_suffix(".txt").write_text(text + "\n")
