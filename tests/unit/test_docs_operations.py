"""docs/operations.md's `venturi stats --json` example has the keys, in order, that the
command prints: the example lacked "waiting" after the status was added."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from venturi.admin import Stats
from venturi.kind_health import KindHealth

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _keys(cls: type[msgspec.Struct]) -> list[str]:
    return [f.encode_name for f in msgspec.structs.fields(cls)]


def test_the_stats_json_example_has_every_key_the_command_prints() -> None:
    [block] = re.findall(r"\$ venturi stats --json\n(\{.*?\n\})\n", PAGE.read_text(), re.S)
    shown = json.loads(block)
    assert list(shown) == _keys(Stats)
    assert shown["kinds"], "the example shows a kind"
    # "workers" is the gauges' alone: None in stats, and so left out of its JSON.
    printed = [k for k in _keys(KindHealth) if k != "workers"]
    for kind in shown["kinds"]:
        assert list(kind) == printed
