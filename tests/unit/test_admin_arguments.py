"""The operator API's argument checks: durations as an operator writes them."""

from __future__ import annotations

import pytest

from venturi import admin
from venturi.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1h30m", 5400)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert admin.parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "7", "d", "7x", "-1d", "1h 30m", "7dd"])
def test_parse_duration_refuses(bad: str) -> None:
    with pytest.raises(ConfigError, match="a duration is"):
        admin.parse_duration(bad)


def test_a_duration_stops_at_a_hundred_years() -> None:
    # `venturi purge --older-than 99999999w` failed in the database: timestamp out of range.
    assert admin.parse_duration("5217w") == 5217 * 604800
    with pytest.raises(ConfigError, match="duration '99999999w' must be at most 100 years"):
        admin.parse_duration("99999999w")


def test_job_ids_stop_at_postgresqls_bigint() -> None:
    # Past it, `venturi jobs retry` printed the driver's "out of int64 range".
    assert admin.common.check_ids([2**63 - 1]) == [2**63 - 1]
    with pytest.raises(ConfigError, match="job ids must be at most 9,223,372,036,854,775,807"):
        admin.common.check_ids([2**63])
