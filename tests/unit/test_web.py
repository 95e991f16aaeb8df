"""The dashboard's pure parts: its argument checks and chart geometry; and a worker
process never imports it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

import venturi
import venturi.web
from venturi.web import charts


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(venturi.ConfigError, match="token must be"):
        venturi.web.app("postgresql://x/y", token=" padded ")
    with pytest.raises(venturi.ConfigError, match="read_only"):
        venturi.web.app("postgresql://x/y", read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(venturi.ConfigError, match="schema must be"):
        venturi.web.app("postgresql://x/y", schema="Bad-Name")


def test_chart_geometry() -> None:
    t0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    points = [(t0 + timedelta(minutes=i), n) for i, n in enumerate([0, 3, 7, 0])]
    c = charts.bar_chart("Done", "done", points, "completed")
    assert c.total == 10 and c.peak == 7 and len(c.bars) == 4
    # Scaled to 10 (the nice ceiling of 7): a bar of 7 fills 70% of the plot height.
    plot_h = charts.HEIGHT - charts.TOP - charts.BOTTOM
    assert c.bars[2].height == pytest.approx(plot_h * 0.7, abs=0.01)
    assert c.bars[0].height == 0 and [t.label for t in c.ticks] == ["0", "5", "10"]
    assert c.bars[1].title.endswith("3 completed")


def test_the_worker_never_imports_the_dashboard() -> None:
    code = (
        "import sys; sys.modules['starlette'] = None; "
        "import venturi, venturi.runtime.worker, venturi.cli, venturi.admin; "
        "assert not [m for m in sys.modules if m.startswith('venturi.web')], 'imported'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
