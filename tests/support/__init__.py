"""What the tests share: the CLI runner, running a worker, waiting without fixed sleeps,
seeded expired leases, and the common carry. Task modules that subprocess workers import
by name (``workertasks``, ``upkeeptasks``) and the ops fixtures (``opsdata``) are modules
of their own here, and so is ``sql``, which renders the
test-only statements of ``sql_templates/`` (never shipped in the wheel)."""

from tests.support.carries import Item
from tests.support.cli import (
    ROOT,
    UNREACHABLE,
    assert_one_clean_error,
    venturi_cli,
    venturi_cli_async,
    without_uvloop,
)
from tests.support.leases import expire_claim, expire_claims, make_due
from tests.support.waits import (
    status_of,
    until_cancelled,
    wait_blocked,
    wait_for,
    wait_stat,
    wait_status,
    wait_until,
    waits_on_a_lock,
)
from tests.support.workers import FAST, events, running

__all__ = [
    "FAST",
    "ROOT",
    "UNREACHABLE",
    "Item",
    "assert_one_clean_error",
    "events",
    "expire_claim",
    "expire_claims",
    "make_due",
    "running",
    "status_of",
    "until_cancelled",
    "venturi_cli",
    "venturi_cli_async",
    "wait_blocked",
    "wait_for",
    "wait_stat",
    "wait_status",
    "wait_until",
    "waits_on_a_lock",
    "without_uvloop",
]
