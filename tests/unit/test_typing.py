"""What a type checker sees of venturi in an application: ``@venturi.task`` gives a
``Task[C]`` of the handler's carry type, so mypy reports a carry of the wrong type at
``enqueue`` / ``enqueue_sync`` / ``job``, a connection that no driver takes, and a name
the package does not have."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """One mypy run over the three snippets, each an application module of its own (a
    run costs seconds, most of it venturi's and the drivers' stubs): each module's error
    lines. A module without errors has none, and mypy itself must not have failed."""
    folder = tmp_path_factory.mktemp("typing")
    files = {}
    for name, body in {"good": GOOD, "bad": BAD, "misspelt": MISSPELT}.items():
        files[name] = folder / f"app_{name}.py"
        files[name].write_text(HEAD + body)
    # MYPYPATH: the checkout's venturi, as an application's mypy finds an installed one.
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            *map(str, files.values()),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    # 1: errors found (the bad snippets'), not 2 (mypy could not check at all).
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    # Each line names its module's file (by name: mypy's cache may give the path of an
    # earlier run's file of the same content).
    lines = done.stdout.splitlines()
    of = {name: [line for line in lines if f"{f.name}:" in line] for name, f in files.items()}
    assert sum(map(len, of.values())) == len(lines), lines
    return {name: [line for line in found if ": error:" in line] for name, found in of.items()}


def test_a_correct_enqueue_passes_mypy(checked: dict[str, list[str]]) -> None:
    assert checked["good"] == []


def test_a_wrong_carry_and_a_wrong_connection_are_reported(checked: dict[str, list[str]]) -> None:
    errors = checked["bad"]
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


def test_a_misspelt_name_of_the_package_is_reported(checked: dict[str, list[str]]) -> None:
    # The deprecated aliases' module-level __getattr__ is hidden from type checkers,
    # which would otherwise accept any attribute of venturi.
    errors = checked["misspelt"]
    assert any('Module has no attribute "taks"' in line for line in errors), errors
    assert any('Module has no attribute "Wroker"' in line for line in errors), errors
