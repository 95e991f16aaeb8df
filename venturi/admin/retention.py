"""Retention by hand: count or delete finished jobs (their journal with them) in batches
(``venturi purge``; the ``Retention`` maintenance task calls ``purge`` too)."""

from __future__ import annotations

from venturi import db, validate
from venturi.admin.common import check_status
from venturi.db.conn import Conn
from venturi.errors import ConfigError
from venturi.sql import DEFAULT_SCHEMA
from venturi.status import FINISHED, STATUSES

# What venturi.admin exports from here.
__all__ = [
    "PURGE_BATCH",
    "purge",
    "purge_count",
]

PURGE_BATCH = 1000

# The finished statuses in the order operators read them (the error message lists them).
_FINISHED_IN_ORDER = tuple(s for s in STATUSES if s in FINISHED)


def _purge_args(status: str, older_than: float, kind: str | None) -> tuple[str, float]:
    checked = check_status(status, _FINISHED_IN_ORDER)
    assert checked is not None
    if isinstance(older_than, bool) or not isinstance(older_than, int | float):
        raise ConfigError(
            f"older_than must be a non-negative number of seconds, got {validate.shown(older_than)}"
        )
    # Finite and at most 100 years, as every duration: nan, inf or 1e300 went to the
    # server as an interval and failed there ("interval out of range").
    secs = validate.seconds(older_than, "older_than", allow_zero=True)
    if kind is not None:
        # A NUL failed in the driver, "invalid byte sequence"; a filter that no kind can
        # be is refused as `kinds pause` refuses it.
        validate.kind(kind)
    return checked, secs


async def purge_count(
    conn: Conn,
    *,
    status: str,
    older_than: float,
    kind: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """How many jobs ``purge`` would delete now."""
    st, secs = _purge_args(status, older_than, kind)
    return await db.operations.job_purge_count(
        conn, schema=schema, status=st, older_than=secs, kind=kind
    )


async def purge(
    conn: Conn,
    *,
    status: str,
    older_than: float,
    kind: str | None = None,
    batch: int = PURGE_BATCH,
    schema: str = DEFAULT_SCHEMA,
) -> int:
    """Delete finished jobs of ``status`` that finished more than ``older_than`` seconds
    ago, ``batch`` rows per statement (each its own transaction, so locks stay short);
    their journal goes with them. Returns how many were deleted."""
    st, secs = _purge_args(status, older_than, kind)
    validate.integer(batch, "batch")
    return await db.operations.job_purge_all(
        conn, schema=schema, status=st, older_than=secs, kind=kind, batch=batch
    )
