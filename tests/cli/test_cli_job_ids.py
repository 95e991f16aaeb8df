"""A job id past PostgreSQL's bigint is one line saying so, for `jobs signal` and
`jobs show` as for every other command on job ids (it was the driver's "out of int64
range", shown as a database error). Real processes."""

from __future__ import annotations

import pytest

from tests.support import assert_one_clean_error, venturi_cli_async


@pytest.mark.parametrize(
    "args", [["jobs", "signal", str(2**63), "go"], ["jobs", "show", str(2**63)]]
)
async def test_a_job_id_past_bigint_says_the_bound(dsn: str, args: list[str]) -> None:
    out = await venturi_cli_async(*args, dsn=dsn)
    assert_one_clean_error(out, "job ids must be at most 9,223,372,036,854,775,807")
    assert out.stderr.count("\n") == 1 and "database error" not in out.stderr
