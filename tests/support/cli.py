"""The one way tests run the ``venturi`` command: a real subprocess, as a user would."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: the working directory of subprocesses, so that test task modules
import by dotted name (``venturi worker tests.support.workertasks``)."""

PASSWORD = "s3cret-pw"
"""The password in the DSNs of tests that check it never shows."""

UNREACHABLE = f"postgresql://me:{PASSWORD}@127.0.0.1:1/db"
"""A DSN nothing answers at: a command must fail on it in one line, password hidden."""


def venturi_cli(
    *args: str,
    dsn: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m venturi ARGS``. The environment is minimal, so a developer's own
    ``VENTURI_DSN`` cannot leak in: ``PATH``, ``VENTURI_TEST_RUNS_DIR`` (where
    ``tests.support.workertasks`` records runs), ``PYTHONPATH`` if set, the DSN if given (as ``VENTURI_DSN``, the
    way an operator sets it), then ``env``."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "VENTURI_TEST_RUNS_DIR": "/tmp"}
    if "PYTHONPATH" in os.environ:
        # The checkout under test, when it is not the installed one: a command run from
        # another directory (a test's own task module) must import the same venturi.
        full["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if dsn is not None:
        full["VENTURI_DSN"] = dsn
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "venturi", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full,
        timeout=timeout,
    )


async def venturi_cli_async(
    *args: str, dsn: str | None = None, env: Mapping[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """`venturi_cli` from async code: in a thread, so the test's event loop (and a worker
    running on it) keeps going meanwhile."""
    return await asyncio.to_thread(venturi_cli, *args, dsn=dsn, env=env, cwd=cwd)


def assert_one_clean_error(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, no traceback, no password, and the error (holding every fragment) is the
    last line of stderr."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and PASSWORD not in out.stderr + out.stdout
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("venturi: "), out.stderr
    for f in fragments:
        assert f in last, (f, last)


def one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    """The command failed as every bad input must: exit 2, one line on stderr starting
    ``venturi:``, no traceback, and holding each of ``needles``."""
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("venturi: ") and "Traceback" not in out.stderr
    for n in needles:
        assert n in out.stderr, out.stderr


def without_uvloop(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``import uvloop`` fails, as on a platform without its wheels:
    a ``uvloop`` package first on the path that raises ImportError."""
    blocker = tmp_path / "no_uvloop" / "uvloop"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('uvloop is not installed here')\n")
    path = os.pathsep.join(p for p in (str(blocker.parent), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}
