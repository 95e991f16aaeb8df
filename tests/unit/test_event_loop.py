"""``venturi worker --loop``: the choice of event loop, and the loop a worker names."""

from __future__ import annotations

import asyncio
import sys

import pytest
import typer
import uvloop

from venturi.cli.worker import parse_loop
from venturi.runtime.worker import event_loop_name


def test_auto_is_uvloop_where_it_is_installed() -> None:
    assert parse_loop("auto") == ("uvloop", uvloop.new_event_loop)
    assert parse_loop(" UVLoop ") == ("uvloop", uvloop.new_event_loop)
    assert parse_loop("asyncio") == ("asyncio", None)


def test_auto_without_uvloop_is_asyncio_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert parse_loop("auto") == ("asyncio", None)
    with pytest.raises(typer.Exit):
        parse_loop("uvloop")


def test_a_bad_loop_is_refused() -> None:
    with pytest.raises(typer.Exit):
        parse_loop("tokio")


def test_the_running_loop_is_named() -> None:
    async def name() -> str:
        return event_loop_name()

    assert asyncio.run(name()) == "asyncio"
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(name()) == "uvloop"
