"""What a type checker sees of venturi in an application: ``@venturi.task`` gives a
``Task[C]`` of the handler's carry type, so mypy reports a carry of the wrong type at
``enqueue`` / ``enqueue_sync`` / ``job``, a connection that no driver takes, and a name
the package does not have."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT

HEAD = """
from __future__ import annotations

from typing import Any

import msgspec
import psycopg
from sqlalchemy.orm import Session

import venturi
from venturi import Context


class Order(msgspec.Struct):
    id: int


class Refund(msgspec.Struct):
    id: int


@venturi.task("typing_ship")
async def ship(ctx: Context[Any], carry: Order) -> None:
    return None
"""

GOOD = """
async def enqueue(conn: psycopg.AsyncConnection[Any], session: Session) -> list[int]:
    a: int = await ship.enqueue(conn, Order(id=1), key="o-1")
    b: int = ship.enqueue_sync(session, Order(id=2))
    return [a, b, *venturi.enqueue_many_sync(session, [ship.job(Order(id=3))])]
"""

BAD = """
async def enqueue(conn: psycopg.AsyncConnection[Any], session: Session) -> None:
    await ship.enqueue(conn, Refund(id=1))
    ship.enqueue_sync(session, Refund(id=2))
    ship.job(Refund(id=3))
    ship.enqueue_sync(42, Order(id=4))
"""


def _mypy(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "app.py"
    snippet.write_text(HEAD + body)
    # MYPYPATH: the checkout's venturi, as an application's mypy finds an installed one.
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


def test_a_correct_enqueue_passes_mypy(tmp_path: Path) -> None:
    done = _mypy(tmp_path, GOOD)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_carry_and_a_wrong_connection_are_reported(tmp_path: Path) -> None:
    done = _mypy(tmp_path, BAD)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 1, done.stdout + done.stderr
    expected = [
        'Argument 2 to "enqueue" of "Task" has incompatible type "Refund"; expected "Order"',
        'Argument 2 to "enqueue_sync" of "Task" has incompatible type "Refund"; expected "Order"',
        'Argument 1 to "job" of "Task" has incompatible type "Refund"; expected "Order"',
        'Argument 1 to "enqueue_sync" of "Task" has incompatible type "int"',
    ]
    assert len(errors) == len(expected), errors
    for line, message in zip(errors, expected, strict=True):
        assert message in line, line


MISSPELT = """
@venturi.taks("typing_misspelt")
async def misspelt(ctx: Context[Any], carry: Order) -> None:
    return None


worker = venturi.Wroker(None, "postgresql://", [ship])
"""


def test_a_misspelt_name_of_the_package_is_reported(tmp_path: Path) -> None:
    # The deprecated aliases' module-level __getattr__ is hidden from type checkers,
    # which would otherwise accept any attribute of venturi.
    done = _mypy(tmp_path, MISSPELT)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 1, done.stdout + done.stderr
    assert any('Module has no attribute "taks"' in line for line in errors), errors
    assert any('Module has no attribute "Wroker"' in line for line in errors), errors
